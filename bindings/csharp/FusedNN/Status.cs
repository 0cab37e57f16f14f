// SPDX-License-Identifier: Apache-2.0

using System;

namespace FusedNN
{
    /// <summary>
    /// The result code of every fallible fusednn call (C <c>fdnn_status</c>). Values are pinned:
    /// they never change between versions. A newer library may return a value not named here.
    /// </summary>
    public enum Status
    {
        /// <summary>Success.</summary>
        Ok = 0,
        /// <summary>A NULL pointer, a bad value or an out-of-range batch.</summary>
        InvalidArgument = 1,
        /// <summary>A file or directory is missing or cannot be read.</summary>
        IoError = 2,
        /// <summary>A file is malformed (JSON syntax, safetensors layout).</summary>
        ParseError = 3,
        /// <summary>The model spec is wrong: unknown layer, bad dims, shapes.</summary>
        InvalidModel = 4,
        /// <summary>A weight is missing, extra, mis-shaped or mis-typed.</summary>
        WeightMismatch = 5,
        /// <summary>The call is not allowed now (a run before the weights are loaded, a load after the first run).</summary>
        InvalidState = 6,
        /// <summary>An output buffer cannot hold the result.</summary>
        BufferTooSmall = 7,
        /// <summary>Host or device memory could not be allocated.</summary>
        OutOfMemory = 8,
        /// <summary>The feature is not available in this build or on this device.</summary>
        Unsupported = 9,
        /// <summary><see cref="Model.Validate"/> found a NaN or Inf weight.</summary>
        NonFiniteWeight = 10,
        /// <summary>The GPU runtime reported an error.</summary>
        DeviceError = 11,
        /// <summary>A bug in fusednn; please report the message.</summary>
        InternalError = 12,
    }

    /// <summary>Where a model runs (C <c>fdnn_device</c>).</summary>
    public enum Device
    {
        /// <summary>The portable CPU backend (exact fp32).</summary>
        Cpu = 0,
        /// <summary>An NVIDIA GPU; creating a model fails with <see cref="Status.Unsupported"/> when none can be used.</summary>
        Cuda = 1,
        /// <summary>The GPU when one can be used, else the CPU. A model reports the device it resolved to.</summary>
        Auto = 2,
    }

    /// <summary>
    /// The least precise arithmetic a model may use for its matrix work (C <c>fdnn_precision</c>).
    /// </summary>
    /// <remarks>
    /// A precision is an upper bound on the error, never a promise of less accuracy. Against the
    /// CPU backend in fp32 (largest absolute difference over the largest magnitude of the
    /// output) the error is at most 1e-3 for <see cref="Tf32"/> and 1e-2 for <see cref="Fp16"/>
    /// and <see cref="Bf16"/>, and never more than twice PyTorch's in the same precision. Inputs
    /// and outputs stay float32. The CPU backend always computes in fp32, so a CPU model reports
    /// <see cref="Fp32"/> whatever was asked.
    /// </remarks>
    public enum Precision
    {
        /// <summary>IEEE 754 binary32 throughout (exact; the default).</summary>
        Fp32 = 0,
        /// <summary>fp32 storage; tensor-core products with a 10-bit mantissa, fp32 accumulation.</summary>
        Tf32 = 1,
        /// <summary>Weights and products in IEEE 754 binary16, fp32 accumulation.</summary>
        Fp16 = 2,
        /// <summary>Weights and products in bfloat16, fp32 accumulation.</summary>
        Bf16 = 3,
    }

    /// <summary>
    /// How a GPU model's host-buffer runs move the input and output (C <c>fdnn_host_io</c>).
    /// </summary>
    /// <remarks>
    /// Every path gives the same bits. The CPU backend reads the caller's buffers directly and
    /// ignores the option.
    /// </remarks>
    public enum HostIo
    {
        /// <summary>Mapped on an integrated GPU (Jetson), staged on a discrete one. The default.</summary>
        Auto = 0,
        /// <summary>Copies through the context's pinned staging.</summary>
        Staged = 1,
        /// <summary>No copies: the kernels read and write the caller's host buffers in place, also on a discrete GPU.</summary>
        Mapped = 2,
    }

    /// <summary>
    /// A fusednn call failed. <see cref="Status"/> says why; <see cref="ErrorMessage"/> is the
    /// library's message for the calling thread, naming the file, tensor, layer or argument at
    /// fault.
    /// </summary>
    /// <remarks>
    /// Argument checks the binding makes before calling the library (buffer lengths, batch range,
    /// null arguments) throw <see cref="ArgumentException"/> and its subclasses instead.
    /// </remarks>
    public class FusedNNException : Exception
    {
        /// <summary>Creates an exception for a failed call.</summary>
        /// <param name="status">The status the call returned.</param>
        /// <param name="errorMessage">The library's message for it.</param>
        public FusedNNException(Status status, string errorMessage)
            : base(FusedNNLibrary.StatusName(status) + (string.IsNullOrEmpty(errorMessage) ? "" : ": " + errorMessage))
        {
            Status = status;
            ErrorMessage = errorMessage ?? string.Empty;
        }

        /// <summary>Why the call failed.</summary>
        public Status Status { get; }

        /// <summary>The library's message: what was at fault and why.</summary>
        public string ErrorMessage { get; }
    }

    /// <summary>The form of <see cref="Model.Explain"/>'s document (C <c>fdnn_explain_format</c>).</summary>
    public enum ExplainFormat
    {
        /// <summary>A JSON object (its fields: docs/bindings.md, "Explaining the plan").</summary>
        Json = 0,
        /// <summary>A table for people, as <c>fusednn info MODEL --plan</c> prints it.</summary>
        Text = 1,
    }
}
