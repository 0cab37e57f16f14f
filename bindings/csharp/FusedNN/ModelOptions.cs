// SPDX-License-Identifier: Apache-2.0

using System;

namespace FusedNN
{
    /// <summary>
    /// Options for creating a <see cref="Model"/>, starting from the library's defaults
    /// (max batch 1024, the CPU, GPU 0, as many CPU threads as pay off, CUDA graphs on, fp32).
    /// </summary>
    /// <example>
    /// <code>
    /// var options = new ModelOptions { MaxBatch = 64, CpuThreads = 1 };
    /// using (var model = Model.FromFile("mlp.safetensors", options)) { ... }
    /// </code>
    /// </example>
    public sealed class ModelOptions
    {
        private NativeModelOptions native;

        /// <summary>Options holding the library's defaults.</summary>
        public unsafe ModelOptions()
        {
            // The library writes no further than the size given: the fields this binding knows.
            NativeModelOptions options;
            NativeMethods.VerifySuccess(
                NativeMethods.fdnn_model_options_init(&options, (UIntPtr)sizeof(NativeModelOptions)));
            native = options;
        }

        /// <summary>Largest batch a run may use (1 or more). Scratch memory is sized for it.</summary>
        /// <remarks>A value below 1 is refused by the library when the model is created.</remarks>
        public long MaxBatch
        {
            get => native.MaxBatch;
            set => native.MaxBatch = value;
        }

        /// <summary>Where to run.</summary>
        public Device Device
        {
            get => native.Device;
            set => native.Device = value;
        }

        /// <summary>GPU ordinal when <see cref="Device"/> is <see cref="FusedNN.Device.Cuda"/> or <see cref="FusedNN.Device.Auto"/>.</summary>
        public int DeviceId
        {
            get => native.DeviceId;
            set => native.DeviceId = value;
        }

        /// <summary>
        /// Threads one CPU run may use: 0 picks the number of hardware threads (used only when the
        /// batch is large enough to pay for them), 1 runs on the calling thread alone.
        /// </summary>
        public int CpuThreads
        {
            get => native.CpuThreads;
            set => native.CpuThreads = value;
        }

        /// <summary>
        /// GPU only: whether each run is captured into a CUDA graph (per context and batch size)
        /// and replayed afterwards, the lowest launch overhead; otherwise kernels launch directly.
        /// </summary>
        public bool CudaGraphs
        {
            get => native.CudaGraphs != 0;
            set => native.CudaGraphs = value ? 1 : 0;
        }

        /// <summary>
        /// The least precise arithmetic the model may use: an upper bound on its error (see
        /// <see cref="FusedNN.Precision"/>). The CPU always runs in fp32;
        /// <see cref="Model.Precision"/> says what runs.
        /// </summary>
        /// <remarks>A value outside the enum is refused by the library when the model is created.</remarks>
        public Precision Precision
        {
            get => native.Precision;
            set => native.Precision = value;
        }

        /// <summary>
        /// The most scratch memory, in bytes, one execution context may take. A model that needs
        /// more fails with <see cref="Status.OutOfMemory"/> naming the option when it is prepared
        /// (its first run or context), before anything is allocated. 0 means no limit; the
        /// default is 64 GiB. Lower it for models from untrusted sources.
        /// </summary>
        public ulong MaxWorkspaceBytes
        {
            get => native.MaxWorkspaceBytes;
            set => native.MaxWorkspaceBytes = value;
        }

        /// <summary>
        /// The most memory, in bytes, the model's weights may take: the spec's declared tensors
        /// as float32 (checked when the model is created, before any weight is read) and the
        /// backend's copy (checked when it is prepared). 0 means no limit; the default is 256 GiB.
        /// </summary>
        public ulong MaxWeightBytes
        {
            get => native.MaxWeightBytes;
            set => native.MaxWeightBytes = value;
        }

        /// <summary>
        /// GPU only: how host-buffer runs move the input and output (see <see cref="FusedNN.HostIo"/>);
        /// <see cref="Context.HostIo"/> says which path a context takes. The default is
        /// <see cref="HostIo.Auto"/>; an undefined value is refused when the model is created.
        /// </summary>
        public HostIo HostIo
        {
            get => native.HostIo;
            set => native.HostIo = value;
        }

        /// <summary>A copy of the C struct for a native call.</summary>
        internal NativeModelOptions ToNative() => native;
    }
}
