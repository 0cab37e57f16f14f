// SPDX-License-Identifier: Apache-2.0
// Every P/Invoke entry point of the fusednn C API (include/fusednn/fusednn.h), and the C structs
// they take, in one place. Nothing here is public: Model, Context and FusedNNLibrary wrap it.

using System;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;

[assembly: InternalsVisibleTo("FusedNN.Tests")]

namespace FusedNN
{
    /// <summary>C <c>fdnn_model_options</c>; filled by <c>fdnn_model_options_init</c>.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeModelOptions
    {
        public UIntPtr StructSize;
        public long MaxBatch;
        public Device Device;
        public int DeviceId;
        public int CpuThreads;
        public int CudaGraphs;
        public Precision Precision;
        public ulong MaxWorkspaceBytes;
        public ulong MaxWeightBytes;
        public HostIo HostIo;
    }

    /// <summary>C <c>fdnn_shape</c>: a rank and up to FDNN_MAX_RANK extents.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct NativeShape
    {
        public const int MaxRank = 8;
        public int Rank;
        public fixed long Dims[MaxRank];
    }

    /// <summary>C <c>fdnn_memory_info</c>.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeMemoryInfo
    {
        public UIntPtr StructSize;
        public long ParameterCount;
        public UIntPtr WeightBytes;
        public UIntPtr ContextBytes;
        public double FlopsPerSample;
        public double BytesPerSample;
    }

    /// <summary>C <c>fdnn_layer_info</c>; the strings are owned by the model.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeLayerInfo
    {
        public UIntPtr StructSize;
        public IntPtr Name;
        public IntPtr Type;
        public NativeShape OutputShape;
        public long ParameterCount;
    }

    /// <summary>C <c>fdnn_dtype</c>: element types of tensors passed in by the caller.</summary>
    internal enum NativeDType
    {
        Float32 = 0,
        Float16 = 1,
        BFloat16 = 2,
    }

    /// <summary>The P/Invoke declarations, one per C function, and the marshalling helpers.</summary>
    internal static class NativeMethods
    {
        /// <summary>
        /// The library name: Mono and .NET look for libfusednn.so (Linux), libfusednn.dylib
        /// (macOS) or fusednn.dll (Windows) on the loader's path.
        /// </summary>
        internal const string LibraryName = "fusednn";

        // ---- Library ---------------------------------------------------------------------------

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern uint fdnn_version();

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fdnn_version_string();

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fdnn_status_string(Status status);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fdnn_last_error_message();

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_cuda_device_count(out int count);

        // ---- Models ----------------------------------------------------------------------------

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern unsafe Status fdnn_model_options_init(NativeModelOptions* options, UIntPtr structSize);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_create_from_file(
            byte[] path, ref NativeModelOptions options, out ModelHandle model);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern unsafe Status fdnn_model_create_from_memory(
            void* data, UIntPtr size, ref NativeModelOptions options, out ModelHandle model);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_create_from_spec(
            byte[] specJson, UIntPtr specLength, ref NativeModelOptions options, out ModelHandle model);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fdnn_model_destroy(IntPtr model);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_load_weights(ModelHandle model, byte[] path);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern unsafe Status fdnn_model_set_weight(
            ModelHandle model, byte[] name, NativeDType dtype, void* data, long* shape, int rank);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_validate(ModelHandle model);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_input_shape(ModelHandle model, out NativeShape shape);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_output_shape(ModelHandle model, out NativeShape shape);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_max_batch(ModelHandle model, out long maxBatch);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_device(ModelHandle model, out Device device);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_precision(ModelHandle model, out Precision precision);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_memory_info(ModelHandle model, ref NativeMemoryInfo info);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_layer_count(ModelHandle model, out int count);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_explain(
            ModelHandle model, long batch, ExplainFormat format, byte[] buffer, UIntPtr bufferCapacity, out UIntPtr size);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_model_layer_info(ModelHandle model, int index, ref NativeLayerInfo info);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern unsafe Status fdnn_model_run(
            ModelHandle model, long batch, float* input, UIntPtr inputCount, float* output, UIntPtr outputCapacity);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern unsafe Status fdnn_model_run_typed(
            ModelHandle model, long batch, void* input, NativeDType inputDType, UIntPtr inputCount, void* output,
            NativeDType outputDType, UIntPtr outputCapacity);

        // ---- Execution contexts ----------------------------------------------------------------

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_context_create(ModelHandle model, out ContextHandle context);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fdnn_context_destroy(IntPtr context);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern unsafe Status fdnn_context_run(
            ContextHandle context, long batch, float* input, UIntPtr inputCount, float* output, UIntPtr outputCapacity);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_context_host_io(ContextHandle context, out HostIo hostIo);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_context_run_device(
            ContextHandle context, long batch, IntPtr deviceInput, UIntPtr inputCount, IntPtr deviceOutput,
            UIntPtr outputCapacity, IntPtr cudaStream);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern unsafe Status fdnn_context_run_typed(
            ContextHandle context, long batch, void* input, NativeDType inputDType, UIntPtr inputCount, void* output,
            NativeDType outputDType, UIntPtr outputCapacity);

        [DllImport(LibraryName, CallingConvention = CallingConvention.Cdecl)]
        internal static extern Status fdnn_context_run_device_typed(
            ContextHandle context, long batch, IntPtr deviceInput, NativeDType inputDType, UIntPtr inputCount,
            IntPtr deviceOutput, NativeDType outputDType, UIntPtr outputCapacity, IntPtr cudaStream);

        // ---- Helpers ---------------------------------------------------------------------------

        /// <summary>
        /// Returns when <paramref name="status"/> is <see cref="Status.Ok"/>; otherwise throws a
        /// <see cref="FusedNNException"/> with the calling thread's last error message. Call it
        /// right after the native call, on the same thread.
        /// </summary>
        internal static void VerifySuccess(Status status)
        {
            if (status != Status.Ok)
            {
                throw new FusedNNException(status, Utf8ToString(fdnn_last_error_message()));
            }
        }

        /// <summary>Copies a NUL-terminated UTF-8 string owned by the library; NULL reads as "".</summary>
        internal static string Utf8ToString(IntPtr text)
        {
            if (text == IntPtr.Zero)
            {
                return string.Empty;
            }
            int length = 0;
            while (Marshal.ReadByte(text, length) != 0)
            {
                length++;
            }
            var bytes = new byte[length];
            Marshal.Copy(text, bytes, 0, length);
            return Encoding.UTF8.GetString(bytes);
        }

        /// <summary>A NUL-terminated UTF-8 copy of <paramref name="text"/> for the C API.</summary>
        /// <exception cref="ArgumentNullException">The text is null.</exception>
        /// <exception cref="ArgumentException">The text holds a NUL character.</exception>
        internal static byte[] StringToUtf8(string text, string parameterName)
        {
            if (text == null)
            {
                throw new ArgumentNullException(parameterName);
            }
            if (text.IndexOf('\0') >= 0)
            {
                throw new ArgumentException("the text contains a NUL character", parameterName);
            }
            int length = Encoding.UTF8.GetByteCount(text);
            var bytes = new byte[length + 1];
            Encoding.UTF8.GetBytes(text, 0, text.Length, bytes, 0);
            return bytes;
        }

        /// <summary>Reads a C shape.</summary>
        internal static unsafe Shape ToShape(NativeShape raw)
        {
            if (raw.Rank < 0 || raw.Rank > NativeShape.MaxRank)
            {
                throw new FusedNNException(Status.InternalError, "the library returned a shape of rank " + raw.Rank);
            }
            var dims = new long[raw.Rank];
            for (int i = 0; i < raw.Rank; i++)
            {
                dims[i] = raw.Dims[i];
            }
            return new Shape(dims);
        }
    }
}
