// SPDX-License-Identifier: Apache-2.0

using System;
using System.Runtime.InteropServices;

namespace FusedNN
{
    /// <summary>
    /// Owns one <c>fdnn_model*</c>; released with <c>fdnn_model_destroy</c>. The runtime keeps it
    /// alive while a P/Invoke call uses it, so disposing a model during a run on another thread
    /// frees it only after that run returns.
    /// </summary>
    internal sealed class ModelHandle : SafeHandle
    {
        /// <summary>An empty handle; the marshaller fills it from an <c>out</c> parameter.</summary>
        public ModelHandle()
            : base(IntPtr.Zero, ownsHandle: true)
        {
        }

        /// <inheritdoc/>
        public override bool IsInvalid => handle == IntPtr.Zero;

        /// <inheritdoc/>
        protected override bool ReleaseHandle()
        {
            NativeMethods.fdnn_model_destroy(handle);
            return true;
        }
    }

    /// <summary>Owns one <c>fdnn_context*</c>; released with <c>fdnn_context_destroy</c>.</summary>
    internal sealed class ContextHandle : SafeHandle
    {
        /// <summary>An empty handle; the marshaller fills it from an <c>out</c> parameter.</summary>
        public ContextHandle()
            : base(IntPtr.Zero, ownsHandle: true)
        {
        }

        /// <inheritdoc/>
        public override bool IsInvalid => handle == IntPtr.Zero;

        /// <inheritdoc/>
        protected override bool ReleaseHandle()
        {
            NativeMethods.fdnn_context_destroy(handle);
            return true;
        }
    }
}
