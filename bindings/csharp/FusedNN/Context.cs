// SPDX-License-Identifier: Apache-2.0

using System;
using System.Runtime.InteropServices;
using System.Threading;

namespace FusedNN
{
    /// <summary>
    /// An execution context: the scratch memory (and, on a GPU, the stream) that one run needs,
    /// allocated once for the model's max batch so that its runs allocate nothing. Create one per
    /// thread with <see cref="Model.CreateContext"/> for the lowest latency.
    /// </summary>
    /// <remarks>
    /// A context is used by one thread at a time; different contexts of one model may run at once.
    /// A second thread calling <see cref="Run(int, float[])"/> while a run is in flight gets an
    /// <see cref="InvalidOperationException"/> rather than a data race. A context keeps its
    /// model's weights alive: the <see cref="Model"/> may be disposed first.
    /// </remarks>
    public sealed class Context : IDisposable
    {
        private readonly ContextHandle handle;
        private readonly RunLayout layout;
        private int running;

        internal Context(ContextHandle handle, RunLayout layout)
        {
            this.handle = handle;
            this.layout = layout;
        }

        /// <summary>The per-sample input shape of the context's model.</summary>
        public Shape InputShape => layout.InputShape;

        /// <summary>The per-sample output shape of the context's model.</summary>
        public Shape OutputShape => layout.OutputShape;

        /// <summary>The largest batch a run accepts.</summary>
        public long MaxBatch => layout.MaxBatch;

        /// <summary>
        /// How this context's host-buffer runs move the data on a GPU: <see cref="FusedNN.HostIo.Staged"/>
        /// or <see cref="FusedNN.HostIo.Mapped"/> (C <c>fdnn_context_host_io</c>).
        /// </summary>
        /// <exception cref="FusedNNException">Status <see cref="Status.Unsupported"/> when the model
        /// runs on the CPU, which reads the caller's buffers directly.</exception>
        public HostIo HostIo
        {
            get
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_context_host_io(handle, out HostIo hostIo));
                return hostIo;
            }
        }

        /// <summary>Runs <paramref name="batch"/> samples with this context; see <see cref="Model.Run(int, float[])"/>.</summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> floats in C order.</param>
        /// <returns>batch x <see cref="OutputShape"/> floats.</returns>
        /// <exception cref="InvalidOperationException">Another thread is running this context.</exception>
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

        /// <summary>Runs into the start of <paramref name="output"/>; see <see cref="Model.Run(int, float[], float[])"/>.</summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> floats.</param>
        /// <param name="output">At least batch x <see cref="OutputShape"/> floats.</param>
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

        /// <summary>Runs on spans; see <see cref="Model.Run(int, float[], float[])"/>.</summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> floats.</param>
        /// <param name="output">At least batch x <see cref="OutputShape"/> floats.</param>
        public unsafe void Run(int batch, ReadOnlySpan<float> input, Span<float> output)
        {
            layout.Check(batch, input.Length, output.Length);
            BeginRun();
            try
            {
                fixed (float* inputPointer = &MemoryMarshal.GetReference(input))
                fixed (float* outputPointer = &MemoryMarshal.GetReference(output))
                {
                    NativeMethods.VerifySuccess(NativeMethods.fdnn_context_run(
                        handle, batch, inputPointer, (UIntPtr)input.Length, outputPointer, (UIntPtr)output.Length));
                }
            }
            finally
            {
                EndRun();
            }
        }

        /// <summary>
        /// Runs 16-bit samples with this context, output in the same dtype; see
        /// <see cref="Model.Run(int, ushort[], DType)"/>. The first typed run allocates the
        /// context's float32 conversion buffers (for <see cref="MaxBatch"/>); later ones allocate nothing.
        /// </summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> elements, as bits.</param>
        /// <param name="dtype"><see cref="DType.Float16"/> or <see cref="DType.BFloat16"/>.</param>
        /// <returns>batch x <see cref="OutputShape"/> elements of <paramref name="dtype"/>, as bits.</returns>
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

        /// <summary>16-bit input and output, each its own dtype; see <see cref="Model.Run(int, ReadOnlySpan{ushort}, DType, Span{ushort}, DType)"/>.</summary>
        /// <param name="batch">Number of samples.</param>
        /// <param name="input">Exactly batch x <see cref="InputShape"/> elements, as bits.</param>
        /// <param name="inputDType"><see cref="DType.Float16"/> or <see cref="DType.BFloat16"/>.</param>
        /// <param name="output">At least batch x <see cref="OutputShape"/> elements.</param>
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

        private unsafe void RunTyped(int batch, void* input, NativeDType inputDType, int inputLength, void* output,
                                     NativeDType outputDType, int outputLength)
        {
            layout.Check(batch, inputLength, outputLength, "elements");
            BeginRun();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_context_run_typed(
                    handle, batch, input, inputDType, (UIntPtr)inputLength, output, outputDType, (UIntPtr)outputLength));
            }
            finally
            {
                EndRun();
            }
        }

        /// <summary>
        /// <see cref="RunDevice(int, IntPtr, long, IntPtr, long, IntPtr)"/> with the input and output in their own dtypes
        /// (<c>fdnn_context_run_device_typed</c>): a 16-bit side is read or written by the kernels
        /// themselves where they can, else converted on the GPU, on <paramref name="cudaStream"/>,
        /// through the context's own float32 buffers. The two buffers must not overlap. Counts are in elements.
        /// </summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="deviceInput">batch x <see cref="InputShape"/> elements of <paramref name="inputDType"/> in device memory.</param>
        /// <param name="inputDType">The input's element type.</param>
        /// <param name="inputCount">Number of elements at <paramref name="deviceInput"/>.</param>
        /// <param name="deviceOutput">Receives batch x <see cref="OutputShape"/> elements of <paramref name="outputDType"/>.</param>
        /// <param name="outputDType">The output's element type.</param>
        /// <param name="outputCapacity">Number of elements <paramref name="deviceOutput"/> can hold.</param>
        /// <param name="cudaStream">A <c>cudaStream_t</c> of the model's device, or <see cref="IntPtr.Zero"/>.</param>
        /// <exception cref="FusedNNException"><see cref="Status.Unsupported"/> when the model runs on the CPU; <see cref="Status.InvalidArgument"/>; <see cref="Status.DeviceError"/>.</exception>
        public void RunDevice(int batch, IntPtr deviceInput, DType inputDType, long inputCount, IntPtr deviceOutput,
                              DType outputDType, long outputCapacity, IntPtr cudaStream)
        {
            if (inputCount < 0 || outputCapacity < 0)
            {
                throw new ArgumentOutOfRangeException(inputCount < 0 ? nameof(inputCount) : nameof(outputCapacity));
            }
            layout.Check(batch, (int)Math.Min(inputCount, int.MaxValue), (int)Math.Min(outputCapacity, int.MaxValue), "elements");
            BeginRun();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_context_run_device_typed(
                    handle, batch, deviceInput, (NativeDType)inputDType, (UIntPtr)inputCount, deviceOutput,
                    (NativeDType)outputDType, (UIntPtr)outputCapacity, cudaStream));
            }
            finally
            {
                EndRun();
            }
        }

        /// <summary>
        /// Runs <paramref name="batch"/> samples on device buffers, queued on the caller's CUDA
        /// stream: nothing is copied or allocated, and the host does not wait unless
        /// <paramref name="cudaStream"/> is zero (then the context's own stream is used and the
        /// call waits for the results).
        /// </summary>
        /// <param name="batch">Number of samples, 1 to <see cref="MaxBatch"/>.</param>
        /// <param name="deviceInput">batch x <see cref="InputShape"/> floats in the model GPU's memory.</param>
        /// <param name="inputCount">Number of floats at <paramref name="deviceInput"/>; must equal batch x input elements.</param>
        /// <param name="deviceOutput">Receives batch x <see cref="OutputShape"/> floats in device memory.</param>
        /// <param name="outputCapacity">Number of floats <paramref name="deviceOutput"/> can hold.</param>
        /// <param name="cudaStream">A <c>cudaStream_t</c> of the model's device, or <see cref="IntPtr.Zero"/>.</param>
        /// <remarks>
        /// The counts are checked against the model's shapes; the pointers cannot be: they must
        /// hold the given number of floats on the model's GPU and stay allocated until the stream
        /// has passed this work.
        /// </remarks>
        /// <exception cref="ArgumentException">The batch or a count does not match the model.</exception>
        /// <exception cref="FusedNNException"><see cref="Status.Unsupported"/> when the model runs on the CPU; <see cref="Status.DeviceError"/>.</exception>
        public void RunDevice(int batch, IntPtr deviceInput, long inputCount, IntPtr deviceOutput, long outputCapacity, IntPtr cudaStream)
        {
            if (inputCount < 0 || outputCapacity < 0)
            {
                throw new ArgumentOutOfRangeException(inputCount < 0 ? nameof(inputCount) : nameof(outputCapacity));
            }
            layout.Check(batch, (int)Math.Min(inputCount, int.MaxValue), (int)Math.Min(outputCapacity, int.MaxValue));
            BeginRun();
            try
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_context_run_device(
                    handle, batch, deviceInput, (UIntPtr)inputCount, deviceOutput, (UIntPtr)outputCapacity, cudaStream));
            }
            finally
            {
                EndRun();
            }
        }

        // Every run enters here: a disposed context and a second thread are refused before the
        // call; EndRun (in a finally) lets the next run in.
        private void BeginRun()
        {
            if (handle.IsClosed)
            {
                throw new ObjectDisposedException(nameof(Context));
            }
            if (Interlocked.CompareExchange(ref running, 1, 0) != 0)
            {
                throw new InvalidOperationException(
                    "this context is running on another thread; a context is used by one thread at a time");
            }
        }

        private void EndRun()
        {
            Volatile.Write(ref running, 0);
        }

        /// <summary>Frees the context's memory.</summary>
        public void Dispose()
        {
            handle.Dispose();
        }
    }
}
