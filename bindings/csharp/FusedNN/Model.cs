// SPDX-License-Identifier: Apache-2.0

using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;

namespace FusedNN
{
    /// <summary>
    /// A network loaded by fusednn: its graph, its weights and the backend it runs on.
    /// </summary>
    /// <remarks>
    /// <para>
    /// Threads: once its weights are loaded, a model may be run and queried from any number of
    /// threads at once (each <see cref="Run(int, float[])"/> borrows scratch memory from the
    /// model's pool). <see cref="LoadWeights"/> and <see cref="SetWeight(string, long[], float[])"/>
    /// must not overlap any other call on the model; this class enforces that by throwing
    /// <see cref="InvalidOperationException"/> instead of letting them race.
    /// </para>
    /// <para>
    /// The first run (or the first <see cref="Context"/>) freezes the weights: loading after that
    /// fails with <see cref="Status.InvalidState"/>. Contexts created from a model stay usable
    /// after the model is disposed.
    /// </para>
    /// </remarks>
    /// <example>
    /// <code>
    /// using (var model = Model.FromFile("mlp.safetensors"))
    /// {
    ///     float[] output = model.Run(2, input); // input: 2 x model.InputShape.ElementCount floats
    /// }
    /// </code>
    /// </example>
    public sealed class Model : IDisposable
    {
        private readonly ModelHandle handle;
        private readonly RunLayout layout;

        // Calls in flight: 0 or more shared calls (runs, queries), or -1 while weights load.
        private int callState;

        private Model(ModelHandle handle)
        {
            this.handle = handle;
            NativeMethods.VerifySuccess(NativeMethods.fdnn_model_input_shape(handle, out NativeShape input));
            NativeMethods.VerifySuccess(NativeMethods.fdnn_model_output_shape(handle, out NativeShape output));
            NativeMethods.VerifySuccess(NativeMethods.fdnn_model_max_batch(handle, out long maxBatch));
            layout = new RunLayout(NativeMethods.ToShape(input), NativeMethods.ToShape(output), maxBatch);
        }

        /// <summary>
        /// Opens a JSON model spec (weights to be loaded next) or a safetensors bundle (a
        /// safetensors file whose metadata carries the spec; weights included).
        /// </summary>
        /// <param name="path">The spec or bundle.</param>
        /// <param name="options">Options, or null for the defaults.</param>
        /// <returns>The model; dispose it when done.</returns>
        /// <exception cref="ArgumentNullException"><paramref name="path"/> is null.</exception>
        /// <exception cref="FusedNNException">
        /// <see cref="Status.IoError"/> naming the path when it cannot be read,
        /// <see cref="Status.ParseError"/>, <see cref="Status.InvalidModel"/>,
        /// <see cref="Status.WeightMismatch"/>, <see cref="Status.Unsupported"/>,
        /// <see cref="Status.InvalidArgument"/> (bad options), <see cref="Status.OutOfMemory"/>.
        /// </exception>
        public static Model FromFile(string path, ModelOptions options = null)
        {
            FusedNNLibrary.EnsureCompatible();
            byte[] pathBytes = NativeMethods.StringToUtf8(path, nameof(path));
            NativeModelOptions native = (options ?? new ModelOptions()).ToNative();
            Status status = NativeMethods.fdnn_model_create_from_file(pathBytes, ref native, out ModelHandle created);
            return Adopt(status, created);
        }

        /// <summary>
        /// Creates a model from a model file's bytes held in memory: a bundle (spec and weights, e.g.
        /// an embedded resource) or a JSON spec. The library copies what it needs.
        /// </summary>
        /// <param name="data">The file's bytes.</param>
        /// <param name="options">Options, or null for the defaults.</param>
        /// <returns>The model; dispose it when done.</returns>
        /// <exception cref="ArgumentNullException"><paramref name="data"/> is null.</exception>
        /// <exception cref="FusedNNException">
        /// <see cref="Status.ParseError"/> (empty, truncated, neither format), <see cref="Status.InvalidModel"/>,
        /// <see cref="Status.WeightMismatch"/>, <see cref="Status.Unsupported"/>,
        /// <see cref="Status.InvalidArgument"/> (bad options), <see cref="Status.OutOfMemory"/>.
        /// </exception>
        public static unsafe Model FromBytes(byte[] data, ModelOptions options = null)
        {
            if (data == null)
            {
                throw new ArgumentNullException(nameof(data));
            }
            FusedNNLibrary.EnsureCompatible();
            NativeModelOptions native = (options ?? new ModelOptions()).ToNative();
            byte placeholder = 0;  // an empty array pins to null; the library reads no byte of it
            fixed (byte* pinned = data)
            {
                byte* bytes = data.Length == 0 ? &placeholder : pinned;
                Status status = NativeMethods.fdnn_model_create_from_memory(
                    bytes, (UIntPtr)data.Length, ref native, out ModelHandle created);
                return Adopt(status, created);
            }
        }

        /// <summary>Creates a model from a JSON spec held in memory; load its weights next.</summary>
        /// <param name="specJson">The spec's text.</param>
        /// <param name="options">Options, or null for the defaults.</param>
        /// <returns>The model; dispose it when done.</returns>
        /// <exception cref="ArgumentNullException"><paramref name="specJson"/> is null.</exception>
        /// <exception cref="FusedNNException">
        /// <see cref="Status.ParseError"/> (with line and column), <see cref="Status.InvalidModel"/>,
        /// <see cref="Status.Unsupported"/>, <see cref="Status.InvalidArgument"/>, <see cref="Status.OutOfMemory"/>.
        /// </exception>
        public static Model FromSpec(string specJson, ModelOptions options = null)
        {
            FusedNNLibrary.EnsureCompatible();
            byte[] spec = NativeMethods.StringToUtf8(specJson, nameof(specJson));
            NativeModelOptions native = (options ?? new ModelOptions()).ToNative();
            Status status = NativeMethods.fdnn_model_create_from_spec(
                spec, (UIntPtr)(spec.Length - 1), ref native, out ModelHandle created);
            return Adopt(status, created);
        }

        private static Model Adopt(Status status, ModelHandle created)
        {
            try
            {
                NativeMethods.VerifySuccess(status);
                return new Model(created);
            }
            catch
            {
                created.Dispose();
                throw;
            }
        }

        /// <summary>The per-sample input shape (without the batch dimension).</summary>
        public Shape InputShape => layout.InputShape;

        /// <summary>The per-sample output shape (without the batch dimension).</summary>
        public Shape OutputShape => layout.OutputShape;

        /// <summary>The largest batch a run accepts (<see cref="ModelOptions.MaxBatch"/>).</summary>
        public long MaxBatch => layout.MaxBatch;

        /// <summary>
        /// Loads weights from a <c>.safetensors</c> file or a directory of <c>&lt;name&gt;.bin</c>
        /// (raw little-endian float32) / <c>&lt;name&gt;.txt</c> files. Every tensor is checked
        /// against the spec; on a mismatch nothing is loaded. Tensors the file lacks may come
        /// from later calls.
        /// </summary>
        /// <param name="path">A safetensors file or a directory.</param>
        /// <exception cref="InvalidOperationException">Another call on this model is in flight.</exception>
        /// <exception cref="FusedNNException">
        /// <see cref="Status.IoError"/>, <see cref="Status.ParseError"/>,
        /// <see cref="Status.WeightMismatch"/> naming the tensor and both shapes,
        /// <see cref="Status.InvalidState"/> once the weights are frozen.
        /// </exception>
        public void LoadWeights(string path)
        {
            FusedNNLibrary.EnsureCompatible();
            byte[] pathBytes = NativeMethods.StringToUtf8(path, nameof(path));
            EnterExclusive();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_model_load_weights(handle, pathBytes));
            }
            finally
            {
                ExitExclusive();
            }
        }

        /// <summary>
        /// Sets one float32 weight tensor (copied), named as in the PyTorch state_dict ("fc1.weight").
        /// </summary>
        /// <param name="name">The tensor's name.</param>
        /// <param name="shape">The tensor's extents; they must equal the spec's.</param>
        /// <param name="data">The elements in C order; exactly the product of the extents.</param>
        /// <exception cref="ArgumentException">The data length does not match the shape, or the rank exceeds 8.</exception>
        /// <exception cref="InvalidOperationException">Another call on this model is in flight.</exception>
        /// <exception cref="FusedNNException">
        /// <see cref="Status.WeightMismatch"/>, <see cref="Status.InvalidState"/> once the weights are frozen.
        /// </exception>
        public void SetWeight(string name, long[] shape, float[] data)
        {
            if (data == null)
            {
                throw new ArgumentNullException(nameof(data));
            }
            SetWeight(name, shape, new ReadOnlySpan<float>(data));
        }

        /// <summary>Sets one float32 weight tensor from a span; see <see cref="SetWeight(string, long[], float[])"/>.</summary>
        /// <param name="name">The tensor's name.</param>
        /// <param name="shape">The tensor's extents.</param>
        /// <param name="data">The elements in C order.</param>
        public unsafe void SetWeight(string name, long[] shape, ReadOnlySpan<float> data)
        {
            fixed (float* pointer = &MemoryMarshal.GetReference(data))
            {
                SetWeightRaw(name, shape, NativeDType.Float32, pointer, data.Length);
            }
        }

        /// <summary>Sets one weight tensor given as IEEE 754 binary16 bit patterns; see <see cref="SetWeight(string, long[], float[])"/>.</summary>
        /// <param name="name">The tensor's name.</param>
        /// <param name="shape">The tensor's extents.</param>
        /// <param name="bits">The elements in C order, as binary16 bit patterns.</param>
        public unsafe void SetWeightFloat16(string name, long[] shape, ushort[] bits)
        {
            if (bits == null)
            {
                throw new ArgumentNullException(nameof(bits));
            }
            fixed (ushort* pointer = &MemoryMarshal.GetReference(new ReadOnlySpan<ushort>(bits)))
            {
                SetWeightRaw(name, shape, NativeDType.Float16, pointer, bits.Length);
            }
        }

        /// <summary>Sets one weight tensor given as bfloat16 bit patterns (the upper half of a float32); see <see cref="SetWeight(string, long[], float[])"/>.</summary>
        /// <param name="name">The tensor's name.</param>
        /// <param name="shape">The tensor's extents.</param>
        /// <param name="bits">The elements in C order, as bfloat16 bit patterns.</param>
        public unsafe void SetWeightBFloat16(string name, long[] shape, ushort[] bits)
        {
            if (bits == null)
            {
                throw new ArgumentNullException(nameof(bits));
            }
            fixed (ushort* pointer = &MemoryMarshal.GetReference(new ReadOnlySpan<ushort>(bits)))
            {
                SetWeightRaw(name, shape, NativeDType.BFloat16, pointer, bits.Length);
            }
        }

        private unsafe void SetWeightRaw(string name, long[] shape, NativeDType dtype, void* data, int count)
        {
            byte[] nameBytes = NativeMethods.StringToUtf8(name, nameof(name));
            if (shape == null)
            {
                throw new ArgumentNullException(nameof(shape));
            }
            if (shape.Length > NativeShape.MaxRank)
            {
                throw new ArgumentException(
                    "weight '" + name + "' has rank " + shape.Length + "; at most " + NativeShape.MaxRank + " is supported",
                    nameof(shape));
            }
            var extents = new Shape(shape);
            long needed;
            try
            {
                needed = extents.ElementCount;
            }
            catch (OverflowException)
            {
                needed = -1;
            }
            if (needed != count)
            {
                throw new ArgumentException(
                    "weight '" + name + "' has " + count + " elements, but shape " + extents + " needs " + needed,
                    nameof(shape));
            }
            // An empty span yields a null pointer; the library wants a real one.
            long placeholder = 0;
            void* pointer = data == null ? &placeholder : data;
            EnterExclusive();
            try
            {
                fixed (long* dims = shape)
                {
                    NativeMethods.VerifySuccess(NativeMethods.fdnn_model_set_weight(
                        handle, nameBytes, dtype, pointer, dims, shape.Length));
                }
            }
            finally
            {
                ExitExclusive();
            }
        }

        /// <summary>Checks the weights: all present and all finite.</summary>
        /// <exception cref="FusedNNException">
        /// <see cref="Status.WeightMismatch"/> naming the missing tensors,
        /// <see cref="Status.NonFiniteWeight"/> naming each tensor with NaN or Inf and its first bad index.
        /// </exception>
        public void Validate()
        {
            EnterShared();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_model_validate(handle));
            }
            finally
            {
                ExitShared();
            }
        }

        /// <summary>The device the model runs on; never <see cref="FusedNN.Device.Auto"/>, which resolves at creation.</summary>
        public Device Device
        {
            get
            {
                EnterShared();
                try
                {
                    NativeMethods.VerifySuccess(NativeMethods.fdnn_model_device(handle, out Device device));
                    return device;
                }
                finally
                {
                    ExitShared();
                }
            }
        }

        /// <summary>
        /// The precision the model runs its matrix work in: the one asked for with
        /// <see cref="ModelOptions.Precision"/> or a more precise one; always
        /// <see cref="FusedNN.Precision.Fp32"/> on the CPU.
        /// </summary>
        /// <exception cref="FusedNNException">
        /// For a GPU model before its first run, the first query sets up the backend:
        /// <see cref="Status.OutOfMemory"/>, <see cref="Status.DeviceError"/>.
        /// </exception>
        public Precision Precision
        {
            get
            {
                EnterShared();
                try
                {
                    NativeMethods.VerifySuccess(NativeMethods.fdnn_model_precision(handle, out Precision precision));
                    return precision;
                }
                finally
                {
                    ExitShared();
                }
            }
        }

        /// <summary>The parameter count and the memory the model and each context use.</summary>
        public MemoryInfo GetMemoryInfo()
        {
            var info = new NativeMemoryInfo { StructSize = (UIntPtr)Marshal.SizeOf(typeof(NativeMemoryInfo)) };
            EnterShared();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_model_memory_info(handle, ref info));
            }
            finally
            {
                ExitShared();
            }
            return new MemoryInfo(info.ParameterCount, (long)info.WeightBytes.ToUInt64(),
                                  (long)info.ContextBytes.ToUInt64(), info.FlopsPerSample,
                                  info.BytesPerSample);
        }

        /// <summary>The number of layers in the spec.</summary>
        public int LayerCount
        {
            get
            {
                EnterShared();
                try
                {
                    NativeMethods.VerifySuccess(NativeMethods.fdnn_model_layer_count(handle, out int count));
                    return count;
                }
                finally
                {
                    ExitShared();
                }
            }
        }

        /// <summary>
        /// How a run of <paramref name="batch"/> samples would go (<c>fdnn_model_explain</c>): for
        /// each kernel the backend runs, the spec layers it covers, the activations fused into it,
        /// the kernel form chosen at this batch and why, where its output lives, and its nominal
        /// FLOPs and bytes. Works before the weights are loaded and freezes nothing.
        /// </summary>
        /// <param name="batch">1 to <see cref="MaxBatch"/>.</param>
        /// <param name="format">A JSON document (the default) or the CLI's table.</param>
        /// <exception cref="FusedNNException"><see cref="Status.InvalidArgument"/> for a batch out of range.</exception>
        public string Explain(long batch, ExplainFormat format = ExplainFormat.Json)
        {
            EnterShared();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_model_explain(handle, batch, format, null, UIntPtr.Zero, out UIntPtr size));
                var buffer = new byte[checked((int)size.ToUInt64())];
                NativeMethods.VerifySuccess(NativeMethods.fdnn_model_explain(handle, batch, format, buffer, (UIntPtr)buffer.Length, out size));
                int length = Math.Max(0, checked((int)size.ToUInt64()) - 1);
                return System.Text.Encoding.UTF8.GetString(buffer, 0, length);
            }
            finally
            {
                ExitShared();
            }
        }

        /// <summary>Describes one layer as written in the spec.</summary>
        /// <param name="index">0 to <see cref="LayerCount"/> - 1.</param>
        /// <exception cref="FusedNNException"><see cref="Status.InvalidArgument"/> for an index out of range.</exception>
        public LayerInfo GetLayerInfo(int index)
        {
            var info = new NativeLayerInfo { StructSize = (UIntPtr)Marshal.SizeOf(typeof(NativeLayerInfo)) };
            EnterShared();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_model_layer_info(handle, index, ref info));
                // The strings belong to the model: copy them while it is certainly alive.
                return new LayerInfo(
                    NativeMethods.Utf8ToString(info.Name),
                    NativeMethods.Utf8ToString(info.Type),
                    NativeMethods.ToShape(info.OutputShape),
                    info.ParameterCount);
            }
            finally
            {
                GC.KeepAlive(handle);
                ExitShared();
            }
        }

        /// <summary>Every layer, in spec order.</summary>
        public IReadOnlyList<LayerInfo> GetLayers()
        {
            int count = LayerCount;
            var layers = new List<LayerInfo>(count);
            for (int i = 0; i < count; i++)
            {
                layers.Add(GetLayerInfo(i));
            }
            return layers;
        }

        /// <summary>
        /// Runs <paramref name="batch"/> samples and returns batch x <see cref="OutputShape"/>
        /// floats in C order. Safe to call from many threads at once. The first run freezes the weights.
        /// </summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> floats in C order.</param>
        /// <returns>The outputs.</returns>
        /// <exception cref="ArgumentOutOfRangeException">The batch is outside 1 to <see cref="MaxBatch"/>.</exception>
        /// <exception cref="ArgumentException">The input has the wrong length.</exception>
        /// <exception cref="InvalidOperationException">Weights are being loaded on another thread.</exception>
        /// <exception cref="FusedNNException">
        /// <see cref="Status.InvalidState"/> when weights are missing, <see cref="Status.OutOfMemory"/>,
        /// <see cref="Status.DeviceError"/>.
        /// </exception>
        public float[] Run(int batch, float[] input)
        {
            if (input == null)
            {
                throw new ArgumentNullException(nameof(input));
            }
            var output = new float[layout.OutputLength(batch)];
            Run(batch, new ReadOnlySpan<float>(input), new Span<float>(output));
            return output;
        }

        /// <summary>
        /// Runs <paramref name="batch"/> samples into the start of <paramref name="output"/>; any
        /// further elements are left as they were. See <see cref="Run(int, float[])"/>.
        /// </summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> floats.</param>
        /// <param name="output">At least batch x <see cref="OutputShape"/> floats; nothing is written on failure.</param>
        /// <exception cref="ArgumentException">A buffer has the wrong length (output: too short).</exception>
        public void Run(int batch, float[] input, float[] output)
        {
            if (input == null)
            {
                throw new ArgumentNullException(nameof(input));
            }
            if (output == null)
            {
                throw new ArgumentNullException(nameof(output));
            }
            Run(batch, new ReadOnlySpan<float>(input), new Span<float>(output));
        }

        /// <summary>Runs on spans; see <see cref="Run(int, float[], float[])"/>.</summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> floats.</param>
        /// <param name="output">At least batch x <see cref="OutputShape"/> floats.</param>
        public unsafe void Run(int batch, ReadOnlySpan<float> input, Span<float> output)
        {
            layout.Check(batch, input.Length, output.Length);
            EnterShared();
            try
            {
                fixed (float* inputPointer = &MemoryMarshal.GetReference(input))
                fixed (float* outputPointer = &MemoryMarshal.GetReference(output))
                {
                    NativeMethods.VerifySuccess(NativeMethods.fdnn_model_run(
                        handle, batch, inputPointer, (UIntPtr)input.Length, outputPointer, (UIntPtr)output.Length));
                }
            }
            finally
            {
                ExitShared();
            }
        }

        /// <summary>
        /// Runs <paramref name="batch"/> samples of 16-bit elements (float16 or bfloat16 bits) and
        /// returns the outputs in the same <paramref name="dtype"/> (<c>fdnn_model_run_typed</c>).
        /// Thread-safe, as <see cref="Run(int, float[])"/>.
        /// </summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> elements, as bits.</param>
        /// <param name="dtype"><see cref="DType.Float16"/> or <see cref="DType.BFloat16"/>.</param>
        /// <returns>batch x <see cref="OutputShape"/> elements of <paramref name="dtype"/>, as bits.</returns>
        /// <exception cref="ArgumentException">A length does not match, or <paramref name="dtype"/> is Float32.</exception>
        /// <exception cref="FusedNNException"><see cref="Status.InvalidArgument"/> for an unknown dtype value; as <see cref="Run(int, float[])"/>.</exception>
        public ushort[] Run(int batch, ushort[] input, DType dtype)
        {
            if (input == null)
            {
                throw new ArgumentNullException(nameof(input));
            }
            var output = new ushort[layout.OutputLength(batch)];
            Run(batch, new ReadOnlySpan<ushort>(input), dtype, new Span<ushort>(output), dtype);
            return output;
        }

        /// <summary>16-bit input and output, each its own dtype; see <see cref="Run(int, ushort[], DType)"/>.</summary>
        /// <param name="batch">Number of samples.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> elements, as bits.</param>
        /// <param name="inputDType"><see cref="DType.Float16"/> or <see cref="DType.BFloat16"/>.</param>
        /// <param name="output">At least batch x <see cref="OutputShape"/> elements; nothing is written on failure.</param>
        /// <param name="outputDType"><see cref="DType.Float16"/> or <see cref="DType.BFloat16"/>.</param>
        public unsafe void Run(int batch, ReadOnlySpan<ushort> input, DType inputDType, Span<ushort> output, DType outputDType)
        {
            NativeDType inType = DTypeChecks.SixteenBit(inputDType, "inputDType");
            NativeDType outType = DTypeChecks.SixteenBit(outputDType, "outputDType");
            fixed (ushort* x = &MemoryMarshal.GetReference(input))
            fixed (ushort* y = &MemoryMarshal.GetReference(output))
            {
                RunTyped(batch, x, inType, input.Length, y, outType, output.Length);
            }
        }

        /// <summary>16-bit input, float output; see <see cref="Run(int, ushort[], DType)"/>.</summary>
        /// <param name="batch">Number of samples.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> elements, as bits.</param>
        /// <param name="inputDType"><see cref="DType.Float16"/> or <see cref="DType.BFloat16"/>.</param>
        /// <param name="output">At least batch x <see cref="OutputShape"/> floats.</param>
        public unsafe void Run(int batch, ReadOnlySpan<ushort> input, DType inputDType, Span<float> output)
        {
            NativeDType inType = DTypeChecks.SixteenBit(inputDType, "inputDType");
            fixed (ushort* x = &MemoryMarshal.GetReference(input))
            fixed (float* y = &MemoryMarshal.GetReference(output))
            {
                RunTyped(batch, x, inType, input.Length, y, NativeDType.Float32, output.Length);
            }
        }

        /// <summary>Float input, 16-bit output; see <see cref="Run(int, ushort[], DType)"/>.</summary>
        /// <param name="batch">Number of samples.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> floats.</param>
        /// <param name="output">At least batch x <see cref="OutputShape"/> elements, as bits.</param>
        /// <param name="outputDType"><see cref="DType.Float16"/> or <see cref="DType.BFloat16"/>.</param>
        public unsafe void Run(int batch, ReadOnlySpan<float> input, Span<ushort> output, DType outputDType)
        {
            NativeDType outType = DTypeChecks.SixteenBit(outputDType, "outputDType");
            fixed (float* x = &MemoryMarshal.GetReference(input))
            fixed (ushort* y = &MemoryMarshal.GetReference(output))
            {
                RunTyped(batch, x, NativeDType.Float32, input.Length, y, outType, output.Length);
            }
        }

        private unsafe void RunTyped(int batch, void* input, NativeDType inputDType, int inputLength, void* output,
                                     NativeDType outputDType, int outputLength)
        {
            layout.Check(batch, inputLength, outputLength, "elements");
            EnterShared();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_model_run_typed(
                    handle, batch, input, inputDType, (UIntPtr)inputLength, output, outputDType, (UIntPtr)outputLength));
            }
            finally
            {
                ExitShared();
            }
        }

        /// <summary>
        /// Creates an execution context: scratch memory for <see cref="MaxBatch"/> samples,
        /// allocated now so that its runs allocate nothing. Freezes the weights.
        /// </summary>
        /// <returns>The context; dispose it when done. It may outlive the model.</returns>
        /// <exception cref="FusedNNException">
        /// <see cref="Status.InvalidState"/> when weights are missing, <see cref="Status.OutOfMemory"/>,
        /// <see cref="Status.DeviceError"/>.
        /// </exception>
        public Context CreateContext()
        {
            EnterShared();
            ContextHandle created = null;
            try
            {
                Status status = NativeMethods.fdnn_context_create(handle, out created);
                NativeMethods.VerifySuccess(status);
                return new Context(created, layout);
            }
            catch
            {
                created?.Dispose();
                throw;
            }
            finally
            {
                ExitShared();
            }
        }

        /// <summary>Frees the model. Contexts created from it stay usable.</summary>
        public void Dispose()
        {
            handle.Dispose();
        }

        private void ThrowIfDisposed()
        {
            if (handle.IsClosed)
            {
                throw new ObjectDisposedException(nameof(Model));
            }
        }

        private void EnterShared()
        {
            ThrowIfDisposed();
            while (true)
            {
                int calls = Volatile.Read(ref callState);
                if (calls < 0)
                {
                    throw new InvalidOperationException(
                        "weights are being loaded into this model on another thread; no other call may overlap that");
                }
                if (Interlocked.CompareExchange(ref callState, calls + 1, calls) == calls)
                {
                    return;
                }
            }
        }

        private void ExitShared()
        {
            Interlocked.Decrement(ref callState);
        }

        private void EnterExclusive()
        {
            ThrowIfDisposed();
            if (Interlocked.CompareExchange(ref callState, -1, 0) != 0)
            {
                throw new InvalidOperationException(
                    "weights cannot be loaded while another call on this model is in flight");
            }
        }

        private void ExitExclusive()
        {
            Volatile.Write(ref callState, 0);
        }
    }

    /// <summary>The shapes and batch limit runs are checked against before the native call.</summary>
    internal sealed class RunLayout
    {
        internal RunLayout(Shape inputShape, Shape outputShape, long maxBatch)
        {
            InputShape = inputShape;
            OutputShape = outputShape;
            MaxBatch = maxBatch;
        }

        internal Shape InputShape { get; }

        internal Shape OutputShape { get; }

        internal long MaxBatch { get; }

        /// <summary>Output floats for a valid batch.</summary>
        internal int OutputLength(int batch)
        {
            CheckBatch(batch);
            return Length(batch, OutputShape, "output");
        }

        /// <summary>Throws unless the batch is in range, the input length exact and the output long enough.</summary>
        internal void Check(int batch, int inputLength, int outputLength, string unit = "floats")
        {
            CheckBatch(batch);
            int inputNeeded = Length(batch, InputShape, "input");
            int outputNeeded = Length(batch, OutputShape, "output");
            if (inputLength != inputNeeded)
            {
                throw new ArgumentException(
                    "input holds " + inputLength + " " + unit + ", but batch " + batch + " x input shape " + InputShape +
                    " needs " + inputNeeded, "input");
            }
            if (outputLength < outputNeeded)
            {
                throw new ArgumentException(
                    "output holds " + outputLength + " " + unit + ", but batch " + batch + " x output shape " + OutputShape +
                    " needs " + outputNeeded, "output");
            }
        }

        private void CheckBatch(int batch)
        {
            if (batch < 1 || batch > MaxBatch)
            {
                throw new ArgumentOutOfRangeException(
                    "batch", batch, "batch must be from 1 to the model's MaxBatch " + MaxBatch);
            }
        }

        private static int Length(int batch, Shape shape, string what)
        {
            long length = batch * shape.ElementCount;
            if (length > int.MaxValue)
            {
                throw new ArgumentOutOfRangeException("batch", batch, "batch " + batch + " makes the " + what + " too large for an array");
            }
            return (int)length;
        }
    }
}
