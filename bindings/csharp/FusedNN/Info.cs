// SPDX-License-Identifier: Apache-2.0

using System;
using System.Collections.Generic;
using System.Text;

namespace FusedNN
{
    /// <summary>A per-sample shape: the extents of one sample, outermost first, without the batch dimension.</summary>
    public sealed class Shape : IEquatable<Shape>
    {
        private readonly long[] dims;

        /// <summary>A shape with the given extents, outermost first.</summary>
        /// <param name="dimensions">The extents; copied.</param>
        public Shape(params long[] dimensions)
        {
            if (dimensions == null)
            {
                throw new ArgumentNullException(nameof(dimensions));
            }
            dims = (long[])dimensions.Clone();
        }

        /// <summary>The extents, outermost first.</summary>
        public IReadOnlyList<long> Dimensions => dims;

        /// <summary>The number of dimensions.</summary>
        public int Rank => dims.Length;

        /// <summary>The number of elements in one sample: the product of the extents (1 for rank 0).</summary>
        public long ElementCount
        {
            get
            {
                long count = 1;
                foreach (long extent in dims)
                {
                    count = checked(count * extent);
                }
                return count;
            }
        }

        /// <summary>The extents as a list, such as <c>[3, 32, 32]</c>.</summary>
        public override string ToString()
        {
            var text = new StringBuilder("[");
            for (int i = 0; i < dims.Length; i++)
            {
                text.Append(i == 0 ? "" : ", ").Append(dims[i]);
            }
            return text.Append(']').ToString();
        }

        /// <summary>Whether both shapes have the same extents.</summary>
        public bool Equals(Shape other)
        {
            if (other == null || other.dims.Length != dims.Length)
            {
                return false;
            }
            for (int i = 0; i < dims.Length; i++)
            {
                if (dims[i] != other.dims[i])
                {
                    return false;
                }
            }
            return true;
        }

        /// <inheritdoc/>
        public override bool Equals(object obj) => Equals(obj as Shape);

        /// <inheritdoc/>
        public override int GetHashCode()
        {
            int hash = 17;
            foreach (long extent in dims)
            {
                hash = hash * 31 + extent.GetHashCode();
            }
            return hash;
        }
    }

    /// <summary>
    /// The parameter count of a model, the memory it and each of its contexts use, and what one
    /// sample costs.
    /// </summary>
    public sealed class MemoryInfo
    {
        internal MemoryInfo(long parameterCount, long weightBytes, long contextBytes,
                            double flopsPerSample, double bytesPerSample)
        {
            ParameterCount = parameterCount;
            WeightBytes = weightBytes;
            ContextBytes = contextBytes;
            FlopsPerSample = flopsPerSample;
            BytesPerSample = bytesPerSample;
        }

        /// <summary>Scalars in all weights as the spec declares them.</summary>
        public long ParameterCount { get; }

        /// <summary>Bytes the backend holds for the weights (after any folding).</summary>
        public long WeightBytes { get; }

        /// <summary>Scratch bytes each execution context allocates; known before any run.</summary>
        public long ContextBytes { get; }

        /// <summary>
        /// Floating-point operations one sample costs (a multiply-add counts 2): lets a server
        /// refuse a model before running it.
        /// </summary>
        public double FlopsPerSample { get; }

        /// <summary>Bytes of activations one sample moves (float32, weights excluded).</summary>
        public double BytesPerSample { get; }
    }

    /// <summary>One layer of a model as written in its spec (before any folding).</summary>
    public sealed class LayerInfo
    {
        internal LayerInfo(string name, string type, Shape outputShape, long parameterCount)
        {
            Name = name;
            Type = type;
            OutputShape = outputShape;
            ParameterCount = parameterCount;
        }

        /// <summary>The layer's name in the spec ("fc1").</summary>
        public string Name { get; }

        /// <summary>The layer type as written in the spec ("Linear").</summary>
        public string Type { get; }

        /// <summary>The per-sample shape of the layer's output.</summary>
        public Shape OutputShape { get; }

        /// <summary>Scalars in this layer's weights.</summary>
        public long ParameterCount { get; }

        /// <inheritdoc/>
        public override string ToString() => Name + " (" + Type + ") -> " + OutputShape;
    }

    /// <summary>Facts about the loaded native library.</summary>
    public static class FusedNNLibrary
    {
        /// <summary>The version of the C header this binding was written against.</summary>
        public static readonly Version HeaderVersion = new Version(0, 4, 0);

        /// <summary>The loaded library's version (major.minor.patch).</summary>
        public static Version Version
        {
            get
            {
                uint number = NativeMethods.fdnn_version();
                return new Version((int)(number / 10000), (int)(number / 100 % 100), (int)(number % 100));
            }
        }

        /// <summary>The loaded library's version as it spells it, "major.minor.patch".</summary>
        public static string VersionString => NativeMethods.Utf8ToString(NativeMethods.fdnn_version_string());

        /// <summary>
        /// Whether the loaded library runs this binding: the same major (ABI) version and a minor
        /// version no lower than <see cref="HeaderVersion"/>'s.
        /// </summary>
        public static bool IsCompatible
        {
            get
            {
                Version library = Version;
                return library.Major == HeaderVersion.Major && library.Minor >= HeaderVersion.Minor;
            }
        }

        private static int compatibilityChecked;

        /// <summary>
        /// Throws unless <see cref="IsCompatible"/>: DllImport finds the unversioned libfusednn.so,
        /// which may be a library of another ABI. Models check this before their first native call.
        /// </summary>
        /// <exception cref="FusedNNException"><see cref="Status.Unsupported"/>: the library is incompatible.</exception>
        public static void EnsureCompatible()
        {
            if (System.Threading.Volatile.Read(ref compatibilityChecked) == 1) return;
            if (!IsCompatible)
            {
                throw new FusedNNException(Status.Unsupported,
                    "the loaded libfusednn is version " + Version + " but this binding needs " +
                    HeaderVersion.Major + ".x with minor >= " + HeaderVersion.Minor +
                    "; point LD_LIBRARY_PATH at a matching library");
            }
            System.Threading.Volatile.Write(ref compatibilityChecked, 1);
        }

        /// <summary>The number of usable GPUs: 0 when the library was built without CUDA or sees none.</summary>
        /// <exception cref="FusedNNException">The library failed to count them.</exception>
        public static int CudaDeviceCount
        {
            get
            {
                NativeMethods.VerifySuccess(NativeMethods.fdnn_cuda_device_count(out int count));
                return count;
            }
        }

        /// <summary>The C name of a status ("FDNN_STATUS_IO_ERROR"); "FDNN_STATUS_UNKNOWN" for other values.</summary>
        /// <param name="status">Any value.</param>
        /// <remarks>Computed without calling the library, so that it works while reporting a load failure.</remarks>
        public static string StatusName(Status status)
        {
            switch (status)
            {
                case Status.Ok: return "FDNN_STATUS_OK";
                case Status.InvalidArgument: return "FDNN_STATUS_INVALID_ARGUMENT";
                case Status.IoError: return "FDNN_STATUS_IO_ERROR";
                case Status.ParseError: return "FDNN_STATUS_PARSE_ERROR";
                case Status.InvalidModel: return "FDNN_STATUS_INVALID_MODEL";
                case Status.WeightMismatch: return "FDNN_STATUS_WEIGHT_MISMATCH";
                case Status.InvalidState: return "FDNN_STATUS_INVALID_STATE";
                case Status.BufferTooSmall: return "FDNN_STATUS_BUFFER_TOO_SMALL";
                case Status.OutOfMemory: return "FDNN_STATUS_OUT_OF_MEMORY";
                case Status.Unsupported: return "FDNN_STATUS_UNSUPPORTED";
                case Status.NonFiniteWeight: return "FDNN_STATUS_NON_FINITE_WEIGHT";
                case Status.DeviceError: return "FDNN_STATUS_DEVICE_ERROR";
                case Status.InternalError: return "FDNN_STATUS_INTERNAL_ERROR";
                default: return "FDNN_STATUS_UNKNOWN";
            }
        }
    }
}
