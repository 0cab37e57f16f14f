// SPDX-License-Identifier: Apache-2.0

using System;

namespace FusedNN
{
    /// <summary>
    /// The element type of a run's input or output (C <c>fdnn_dtype</c>), for the typed runs
    /// (<see cref="Model.Run(int, ReadOnlySpan{ushort}, DType, Span{ushort}, DType)"/> and its
    /// siblings). 16-bit elements are passed as their bits in <see cref="ushort"/> buffers.
    /// </summary>
    /// <remarks>
    /// A 16-bit input is widened to float32 exactly, the model runs in its precision, and a 16-bit
    /// output is narrowed with round to nearest even (beyond the type's range: infinity; NaN stays
    /// NaN). Float32 both ways is the plain float run.
    /// </remarks>
    public enum DType
    {
        /// <summary>IEEE 754 binary32, in <see cref="float"/> buffers.</summary>
        Float32 = 0,

        /// <summary>IEEE 754 binary16, as bits in <see cref="ushort"/> buffers.</summary>
        Float16 = 1,

        /// <summary>bfloat16 (the upper half of a float32), as bits in <see cref="ushort"/> buffers.</summary>
        BFloat16 = 2,
    }

    internal static class DTypeChecks
    {
        /// <summary>Throws unless a <see cref="ushort"/> buffer can hold <paramref name="dtype"/>.</summary>
        internal static NativeDType SixteenBit(DType dtype, string argument)
        {
            if (dtype == DType.Float32)
            {
                throw new ArgumentException(
                    argument + " is Float32 but the buffer holds 16-bit elements; use the float overload", argument);
            }
            return (NativeDType)dtype;  // an unknown value is refused by the library, naming the argument
        }
    }
}
