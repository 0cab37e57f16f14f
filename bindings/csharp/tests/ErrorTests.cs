// SPDX-License-Identifier: Apache-2.0
// Error paths: library failures arrive as FusedNNException with the right status and a message
// naming what was at fault; argument checks made before the native call throw ArgumentException.

using System;
using System.IO;
using System.Threading;

namespace FusedNN.Tests
{
    internal static partial class Program
    {
        private static void RegisterErrorTests()
        {
            Add("errors: missing file is IoError naming the path", () =>
            {
                string path = Path.Combine(Path.GetTempPath(), "fusednn-csharp-test-does-not-exist", "model.safetensors");
                var error = Fails(Status.IoError, () => Model.FromFile(path), "FromFile");
                Contains(error.ErrorMessage, path, "message");
                Contains(error.Message, "FDNN_STATUS_IO_ERROR: ", "Message");
            });

            Add("errors: empty or truncated bytes are ParseError naming <memory>", () =>
            {
                byte[] bundle = File.ReadAllBytes(Path.Combine(FixturesDir, "formats", "tiny_mlp.safetensors"));
                foreach (int length in new[] { 0, 100, bundle.Length - 1 })
                {
                    byte[] cut = new byte[length];
                    Array.Copy(bundle, cut, length);
                    var error = Fails(Status.ParseError, () => Model.FromBytes(cut), "FromBytes");
                    Contains(error.ErrorMessage, "<memory>", "message");
                }
                Throws<ArgumentNullException>(() => Model.FromBytes(null), "FromBytes(null)");
            });

            Add("errors: malformed spec is ParseError", () =>
            {
                var error = Fails(Status.ParseError, () => Model.FromSpec("{\"fusednn\": 1, \"input\": "), "FromSpec");
                Check(error.ErrorMessage.Length > 0, "empty message");
            });

            Add("errors: unknown layer is InvalidModel naming it", () =>
            {
                const string spec = "{\"fusednn\": 1, \"input\": {\"shape\": [4]}, \"layers\": [{\"type\": \"Frobnicate\", \"name\": \"mystery\"}]}";
                var error = Fails(Status.InvalidModel, () => Model.FromSpec(spec), "FromSpec");
                Contains(error.ErrorMessage, "Frobnicate", "message");
            });

            Add("errors: zero max batch is InvalidArgument", () =>
            {
                Fails(Status.InvalidArgument, () => Model.FromSpec(LinearModel.Spec(4, 3), new ModelOptions { MaxBatch = 0 }), "FromSpec");
            });

            Add("errors: max batch past FDNN_MAX_BATCH_LIMIT is InvalidArgument", () =>
            {
                var error = Fails(Status.InvalidArgument, () => Model.FromSpec(LinearModel.Spec(4, 3),
                    new ModelOptions { MaxBatch = (1L << 31) }), "FromSpec");
                Contains(error.ErrorMessage, "options.max_batch", "message");
            });

            Add("errors: weight limit is OutOfMemory naming the option; memory info gives the cost", () =>
            {
                // 64 x 64 + 64 floats: 16,640 bytes.
                var error = Fails(Status.OutOfMemory, () => Model.FromSpec(LinearModel.Spec(64, 64),
                    new ModelOptions { MaxWeightBytes = 16000 }), "FromSpec");
                Contains(error.ErrorMessage, "options.max_weight_bytes", "message");
                Contains(error.ErrorMessage, "16640 bytes", "message");
                var defaults = new ModelOptions();
                Equal(1UL << 36, defaults.MaxWorkspaceBytes, "default MaxWorkspaceBytes");
                Equal(1UL << 38, defaults.MaxWeightBytes, "default MaxWeightBytes");
                using (var model = Model.FromSpec(LinearModel.Spec(64, 64), new ModelOptions { MaxWeightBytes = 16640 }))
                {
                    MemoryInfo memory = model.GetMemoryInfo();
                    Equal(2.0 * 64 * 64, memory.FlopsPerSample, "FlopsPerSample");
                    Equal(4.0 * (64 + 64), memory.BytesPerSample, "BytesPerSample");
                }
            });

            Add("errors: HostIo is checked, ignored on the CPU, whose contexts report no path", () =>
            {
                var error = Fails(Status.InvalidArgument, () => Model.FromSpec(LinearModel.Spec(4, 3),
                    new ModelOptions { HostIo = (HostIo)3 }), "FromSpec");
                Contains(error.ErrorMessage, "options.host_io", "message");
                Equal(HostIo.Auto, new ModelOptions().HostIo, "default HostIo");
                foreach (HostIo hostIo in new[] { HostIo.Auto, HostIo.Staged, HostIo.Mapped })
                {
                    using (var model = Model.FromSpec(LinearModel.Spec(4, 3), new ModelOptions { HostIo = hostIo }))
                    {
                        model.SetWeight("fc.weight", new long[] { 3, 4 }, new float[12]);
                        model.SetWeight("fc.bias", new long[] { 3 }, new float[] { 1, 2, 3 });
                        float[] output = model.Run(1, new float[4]);
                        Equal(2.0f, output[1], "output");
                        using (var context = model.CreateContext())
                        {
                            var unsupported = Fails(Status.Unsupported, () => GC.KeepAlive(context.HostIo), "Context.HostIo");
                            Contains(unsupported.ErrorMessage, "CPU", "message");
                        }
                    }
                }
            });

            Add("errors: null arguments throw ArgumentNullException", () =>
            {
                Throws<ArgumentNullException>(() => Model.FromFile(null), "FromFile(null)");
                Throws<ArgumentNullException>(() => Model.FromSpec(null), "FromSpec(null)");
            });

            Add("errors: wrong weight shape is WeightMismatch naming the tensor", () =>
            {
                using (var model = Model.FromSpec(LinearModel.Spec(4, 3)))
                {
                    var error = Fails(Status.WeightMismatch, () => model.SetWeight("fc.weight", new long[] { 4, 3 }, new float[12]), "SetWeight");
                    Contains(error.ErrorMessage, "fc.weight", "message");
                    Fails(Status.WeightMismatch, () => model.SetWeight("fc.nonexistent", new long[] { 3 }, new float[3]), "SetWeight");
                }
            });

            Add("errors: weight length, rank and name are checked before the call", () =>
            {
                using (var model = Model.FromSpec(LinearModel.Spec(4, 3)))
                {
                    Throws<ArgumentException>(() => model.SetWeight("fc.weight", new long[] { 3, 4 }, new float[11]), "length");
                    Throws<ArgumentException>(() => model.SetWeight("fc\0weight", new long[] { 3, 4 }, new float[12]), "NUL");
                    Throws<ArgumentException>(() => model.SetWeight("fc.weight", new long[9] { 1, 1, 1, 1, 1, 1, 1, 1, 1 }, new float[1]), "rank");
                }
            });

            Add("errors: missing weights fail Validate, Run and CreateContext", () =>
            {
                using (var model = Model.FromSpec(LinearModel.Spec(4, 3)))
                {
                    model.SetWeight("fc.weight", new long[] { 3, 4 }, new float[12]);
                    var error = Fails(Status.WeightMismatch, model.Validate, "Validate");
                    Contains(error.ErrorMessage, "fc.bias", "message");
                    Fails(Status.InvalidState, () => model.Run(1, new float[4]), "Run");
                    Fails(Status.InvalidState, () => model.CreateContext(), "CreateContext");
                }
            });

            Add("errors: non-finite weight fails Validate", () =>
            {
                using (var model = Model.FromSpec(LinearModel.Spec(2, 1)))
                {
                    model.SetWeight("fc.weight", new long[] { 1, 2 }, new[] { 1f, float.NaN });
                    model.SetWeight("fc.bias", new long[] { 1 }, new[] { 0f });
                    var error = Fails(Status.NonFiniteWeight, model.Validate, "Validate");
                    Contains(error.ErrorMessage, "fc.weight", "message");
                }
            });

            Add("errors: weights are frozen after the first run", () =>
            {
                using (var linear = new LinearModel(4, 3, new ModelOptions(), new Random("frozen")))
                {
                    linear.Model.Run(1, new float[4]);
                    Fails(Status.InvalidState, () => linear.Model.SetWeight("fc.bias", new long[] { 3 }, new float[3]), "SetWeight");
                }
            });

            Add("errors: missing weight file is IoError naming the path", () =>
            {
                using (var model = Model.FromSpec(LinearModel.Spec(4, 3)))
                {
                    string path = Path.Combine(Path.GetTempPath(), "fusednn-csharp-test-no-weights.safetensors");
                    var error = Fails(Status.IoError, () => model.LoadWeights(path), "LoadWeights");
                    Contains(error.ErrorMessage, path, "message");
                }
            });

            Add("errors: buffer lengths and batch are checked before the call", () =>
            {
                using (var linear = new LinearModel(4, 3, new ModelOptions { MaxBatch = 4 }, new Random("lengths")))
                {
                    Model model = linear.Model;
                    var error = Throws<ArgumentException>(() => model.Run(2, new float[7]), "short input");
                    Contains(error.Message, "needs 8", "message");
                    Equal("input", error.ParamName, "ParamName");

                    var small = new float[5];
                    error = Throws<ArgumentException>(() => model.Run(2, new float[8], small), "short output");
                    Equal("output", error.ParamName, "ParamName");
                    SameValues(new float[5], small, "nothing written on failure");

                    Throws<ArgumentOutOfRangeException>(() => model.Run(0, new float[0]), "batch 0");
                    Throws<ArgumentOutOfRangeException>(() => model.Run(5, new float[20]), "batch above MaxBatch");

                    var large = new float[8];
                    large[6] = 7f;
                    large[7] = 7f;
                    model.Run(2, new float[8], large);
                    Equal(7f, large[6], "tail left alone");
                    Equal(7f, large[7], "tail left alone");

                    using (Context context = model.CreateContext())
                    {
                        Throws<ArgumentException>(() => context.Run(1, new float[3]), "context short input");
                        Throws<ArgumentException>(() => context.Run(1, new float[4], new float[2]), "context short output");
                    }
                }
            });

            Add("errors: layer index out of range is InvalidArgument", () =>
            {
                using (var model = Model.FromSpec(LinearModel.Spec(4, 3)))
                {
                    Fails(Status.InvalidArgument, () => model.GetLayerInfo(5), "GetLayerInfo");
                }
            });

            Add("errors: messages are per thread", () =>
            {
                var first = Fails(Status.ParseError, () => Model.FromSpec("not json"), "first");
                var other = new Thread(() =>
                {
                    try
                    {
                        Model.FromFile("/nonexistent/elsewhere.json");
                    }
                    catch (FusedNNException)
                    {
                    }
                });
                other.Start();
                other.Join();
                var again = Fails(Status.ParseError, () => Model.FromSpec("not json"), "again");
                Equal(first.ErrorMessage, again.ErrorMessage, "message");
            });

            Add("errors: status names match the library", () =>
            {
                for (int code = 0; code <= 13; code++)
                {
                    var status = (Status)code;
                    Equal(NativeMethods.Utf8ToString(NativeMethods.fdnn_status_string(status)), FusedNNLibrary.StatusName(status), "status " + code);
                }
                Equal("FDNN_STATUS_UNKNOWN", FusedNNLibrary.StatusName((Status)4242), "unknown");
            });

            Add("errors: device run on a CPU model is Unsupported", () =>
            {
                using (var linear = new LinearModel(4, 3, new ModelOptions { MaxBatch = 2 }, new Random("device")))
                using (Context context = linear.Model.CreateContext())
                {
                    // Host memory stands in for device memory: a CPU model refuses before touching it.
                    IntPtr input = System.Runtime.InteropServices.Marshal.AllocHGlobal(8 * 4);
                    IntPtr output = System.Runtime.InteropServices.Marshal.AllocHGlobal(6 * 4);
                    try
                    {
                        Fails(Status.Unsupported, () => context.RunDevice(2, input, 8, output, 6, IntPtr.Zero), "RunDevice");
                        Throws<ArgumentException>(() => context.RunDevice(2, input, 7, output, 6, IntPtr.Zero), "RunDevice count");
                    }
                    finally
                    {
                        System.Runtime.InteropServices.Marshal.FreeHGlobal(input);
                        System.Runtime.InteropServices.Marshal.FreeHGlobal(output);
                    }
                }
            });

            Add("errors: calls after Dispose throw ObjectDisposedException", () =>
            {
                var linear = new LinearModel(4, 3, new ModelOptions(), new Random("disposed"));
                Context context = linear.Model.CreateContext();
                linear.Dispose();
                linear.Dispose();
                Throws<ObjectDisposedException>(() => linear.Model.Run(1, new float[4]), "Run");
                Throws<ObjectDisposedException>(() => linear.Model.LoadWeights("x"), "LoadWeights");
                context.Run(1, new float[4]);
                context.Dispose();
                Throws<ObjectDisposedException>(() => context.Run(1, new float[4]), "context Run");
            });
        }
    }
}
