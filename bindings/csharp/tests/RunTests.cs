// SPDX-License-Identifier: Apache-2.0
// Runs against an independent reference: an in-memory Linear model whose weights the test sets,
// and the golden fixtures made with PyTorch.

using System;
using System.IO;
using System.Linq;

namespace FusedNN.Tests
{
    internal static partial class Program
    {
        private const double Tolerance = 1e-5;

        private static void RegisterRunTests()
        {
            Add("run: Linear model matches the reference (arrays and spans)", () =>
            {
                var random = new Random("linear");
                using (var linear = new LinearModel(13, 7, new ModelOptions { MaxBatch = 16 }, random))
                {
                    foreach (int batch in new[] { 1, 3, 16 })
                    {
                        float[] input = random.Floats(batch * 13);
                        float[] output = linear.Model.Run(batch, input);
                        double error = Numerics.RelativeError(output, linear.Reference(batch, input));
                        Check(error <= Tolerance, "batch " + batch + ": relative error " + error);

                        var poisoned = Enumerable.Repeat(float.NaN, batch * 7 + 2).ToArray();
                        linear.Model.Run(batch, new ReadOnlySpan<float>(input), new Span<float>(poisoned, 1, batch * 7));
                        SameValues(output, poisoned.Skip(1).Take(batch * 7).ToArray(), "span run at batch " + batch);
                        Check(float.IsNaN(poisoned[0]) && float.IsNaN(poisoned[batch * 7 + 1]), "wrote outside the span");
                    }
                }
            });

            Add("run: Explain names the step's form and its FLOPs (2 x 13 x 7 a sample)", () =>
            {
                var random = new Random("explain");
                using (var linear = new LinearModel(13, 7, new ModelOptions { MaxBatch = 16, CpuThreads = 1 }, random))
                {
                    string json = linear.Model.Explain(8);
                    Check(json.Contains("\"form\": \"packed GEMM"), json);
                    Check(json.Contains("\"flops_per_sample\": 182.0"), json);
                    string table = linear.Model.Explain(2, ExplainFormat.Text);
                    Check(table.Contains("dot products"), table);
                    var error = Throws<FusedNNException>(() => linear.Model.Explain(17), "batch past max_batch");
                    Equal(Status.InvalidArgument, error.Status, "status");
                    Check(error.ErrorMessage.Contains("batch is 17"), error.ErrorMessage);
                }
            });

            Add("run: context matches Model.Run and outlives the model", () =>
            {
                var random = new Random("context");
                var linear = new LinearModel(5, 2, new ModelOptions { MaxBatch = 8 }, random);
                float[] input = random.Floats(8 * 5);
                float[] expected = linear.Model.Run(8, input);
                using (Context context = linear.Model.CreateContext())
                {
                    Equal(8L, context.MaxBatch, "MaxBatch");
                    Equal(new Shape(2), context.OutputShape, "OutputShape");
                    linear.Dispose();
                    SameValues(expected, context.Run(8, input), "context run");
                }
            });

            Add("run: half-precision weights are converted", () =>
            {
                // 0.5, -2.0 and 0.25 are exact in binary16 and bfloat16.
                foreach (bool bfloat in new[] { false, true })
                {
                    using (var model = Model.FromSpec(LinearModel.Spec(2, 1)))
                    {
                        if (bfloat)
                        {
                            model.SetWeightBFloat16("fc.weight", new long[] { 1, 2 }, new ushort[] { 0x3F00, 0xC000 });
                            model.SetWeightBFloat16("fc.bias", new long[] { 1 }, new ushort[] { 0x3E80 });
                        }
                        else
                        {
                            model.SetWeightFloat16("fc.weight", new long[] { 1, 2 }, new ushort[] { 0x3800, 0xC000 });
                            model.SetWeightFloat16("fc.bias", new long[] { 1 }, new ushort[] { 0x3400 });
                        }
                        model.Validate();
                        float[] output = model.Run(1, new[] { 4f, 1f });
                        Equal(0.5f * 4f - 2f * 1f + 0.25f, output[0], bfloat ? "bfloat16" : "float16");
                    }
                }
            });

            Add("run: model describes itself", () =>
            {
                const string spec = "{\"fusednn\": 1, \"input\": {\"shape\": [6]}, \"layers\": [" +
                    "{\"type\": \"Linear\", \"name\": \"fc1\", \"in_features\": 6, \"out_features\": 4}," +
                    "{\"type\": \"ReLU\", \"name\": \"act\"}," +
                    "{\"type\": \"Linear\", \"name\": \"fc2\", \"in_features\": 4, \"out_features\": 3, \"bias\": false}]}";
                using (var model = Model.FromSpec(spec, new ModelOptions { MaxBatch = 32, CpuThreads = 1, CudaGraphs = false }))
                {
                    Equal(new Shape(6), model.InputShape, "InputShape");
                    Equal("[3]", model.OutputShape.ToString(), "OutputShape");
                    Equal(32L, model.MaxBatch, "MaxBatch");
                    Equal(Device.Cpu, model.Device, "Device");
                    var layers = model.GetLayers();
                    Equal("fc1,act,fc2", string.Join(",", layers.Select(l => l.Name)), "names");
                    Equal("Linear,ReLU,Linear", string.Join(",", layers.Select(l => l.Type)), "types");
                    Equal(new Shape(4), layers[0].OutputShape, "fc1 shape");
                    Equal(6L * 4 + 4, layers[0].ParameterCount, "fc1 parameters");
                    Equal(0L, layers[1].ParameterCount, "act parameters");
                    Equal(4L * 3, layers[2].ParameterCount, "fc2 parameters");
                    Equal(6L * 4 + 4 + 4 * 3, model.GetMemoryInfo().ParameterCount, "ParameterCount");
                }
                Check(FusedNNLibrary.IsCompatible, "library " + FusedNNLibrary.Version + " does not run header " + FusedNNLibrary.HeaderVersion);
                Equal(FusedNNLibrary.Version.ToString(), FusedNNLibrary.VersionString, "VersionString");
                Check(FusedNNLibrary.CudaDeviceCount >= 0, "CudaDeviceCount");
                var defaults = new ModelOptions();
                Equal(1024L, defaults.MaxBatch, "default MaxBatch");
                Equal(Device.Cpu, defaults.Device, "default Device");
                Check(defaults.CudaGraphs, "default CudaGraphs");
                Equal((ulong)System.Runtime.InteropServices.Marshal.SizeOf(typeof(NativeModelOptions)),
                    defaults.ToNative().StructSize.ToUInt64(), "options declare this binding's struct size");
            });

            Add("run: golden seed_mlp (bundle from its file and its bytes, and spec + weight directory)", () =>
            {
                string directory = Path.Combine(FixturesDir, "golden", "seed_mlp");
                string bundle = Path.Combine(directory, "model.safetensors");
                Check(File.Exists(bundle), "no fixture at " + bundle);
                var io = SafeTensors.Read(Path.Combine(directory, "io.safetensors"));
                using (Model fromBundle = Model.FromFile(bundle))
                using (Model fromBytes = Model.FromBytes(File.ReadAllBytes(bundle)))
                using (Model fromSpec = Model.FromFile(Path.Combine(directory, "spec.json")))
                {
                    fromSpec.LoadWeights(Path.Combine(directory, "weights_bin"));
                    int ran = 0;
                    foreach (string name in io.Keys.Where(k => k.StartsWith("input_b", StringComparison.Ordinal)))
                    {
                        string suffix = name.Substring("input_b".Length);
                        int batch = int.Parse(suffix);
                        Tensor input = io[name];
                        Tensor expected = io["output_b" + suffix];
                        Equal(fromBundle.InputShape, new Shape(input.Shape.Skip(1).ToArray()), "input shape");
                        Equal(fromBundle.OutputShape, new Shape(expected.Shape.Skip(1).ToArray()), "output shape");
                        foreach (Model model in new[] { fromBundle, fromBytes, fromSpec })
                        {
                            double error = Numerics.RelativeError(model.Run(batch, input.Data), expected.Data);
                            Check(error <= Tolerance, "batch " + batch + ": relative error " + error);
                        }
                        ran++;
                    }
                    Check(ran > 0, "io.safetensors holds no input_b<N>");
                }
            });
        }
    }
}
