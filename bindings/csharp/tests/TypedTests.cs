// SPDX-License-Identifier: Apache-2.0
// Typed runs on the CPU: float16 / bfloat16 bits against the float run narrowed by an independent
// converter; buffers checked against their dtypes; unknown dtype values refused by the library.

using System;
using System.Linq;

namespace FusedNN.Tests
{
    internal static partial class Program
    {
        // float -> bfloat16 bits, round to nearest even (the test's values are finite).
        private static ushort ToBFloat16(float value)
        {
            uint bits = BitConverter.ToUInt32(BitConverter.GetBytes(value), 0);
            return (ushort)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
        }

        // float -> float16 bits, round to nearest even, for finite values in float16's normal range.
        private static ushort ToHalf(float value)
        {
            uint bits = BitConverter.ToUInt32(BitConverter.GetBytes(value), 0);
            ushort sign = (ushort)((bits >> 16) & 0x8000u);
            uint magnitude = bits & 0x7FFFFFFFu;
            if (magnitude >= 0x477FF000u)
            {
                return (ushort)(sign | 0x7C00u);
            }
            Check(magnitude >= 0x38800000u, "the test keeps away from float16 subnormals: " + value);
            uint half = (((magnitude >> 23) - 112u) << 10) | ((magnitude >> 13) & 0x3FFu);
            uint rest = magnitude & 0x1FFFu;
            if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0))
            {
                half++;
            }
            return (ushort)(sign | half);
        }

        // Values exact in float16 and bfloat16 alike: k / 16 with 1 <= |k| <= 128.
        private static float[] ExactInputs(Random random, int count)
        {
            return random.Floats(count).Select(v =>
            {
                float k = (int)(Math.Abs(v) * 64) % 128 + 1;
                return v < 0 ? -k / 16 : k / 16;
            }).ToArray();
        }

        private static void RegisterTypedTests()
        {
            Add("typed: every dtype pair matches the float run narrowed", () =>
            {
                var random = new Random("typed");
                using (var linear = new LinearModel(6, 4, new ModelOptions { MaxBatch = 8 }, random))
                using (Context context = linear.Model.CreateContext())
                {
                    const int batch = 3;
                    float[] input = ExactInputs(random, batch * 6);
                    float[] reference = linear.Model.Run(batch, input);
                    var sources = new[]
                    {
                        Tuple.Create(DType.Float16, input.Select(ToHalf).ToArray()),
                        Tuple.Create(DType.BFloat16, input.Select(ToBFloat16).ToArray()),
                    };
                    foreach (var source in sources)
                    {
                        var wide = new float[batch * 4];
                        linear.Model.Run(batch, new ReadOnlySpan<ushort>(source.Item2), source.Item1, new Span<float>(wide));
                        SameValues(reference, wide, source.Item1 + " -> Float32");
                        foreach (DType outType in new[] { DType.Float16, DType.BFloat16 })
                        {
                            ushort[] expected = reference.Select(outType == DType.Float16 ? (Func<float, ushort>)ToHalf : ToBFloat16).ToArray();
                            var output = new ushort[batch * 4];
                            context.Run(batch, new ReadOnlySpan<ushort>(source.Item2), source.Item1, new Span<ushort>(output), outType);
                            Check(output.SequenceEqual(expected), source.Item1 + " -> " + outType);
                            var fromFloat = new ushort[batch * 4];
                            linear.Model.Run(batch, new ReadOnlySpan<float>(input), new Span<ushort>(fromFloat), outType);
                            Check(fromFloat.SequenceEqual(expected), "Float32 -> " + outType);
                        }
                        Check(linear.Model.Run(batch, source.Item2, source.Item1)
                                  .SequenceEqual(context.Run(batch, source.Item2, source.Item1)), "model and context");
                    }
                }
            });

            Add("typed: buffers must fit their dtypes; unknown values are refused by name", () =>
            {
                var random = new Random("typed-errors");
                using (var linear = new LinearModel(3, 2, new ModelOptions { MaxBatch = 4 }, random))
                using (Context context = linear.Model.CreateContext())
                {
                    Throws<ArgumentException>(() => linear.Model.Run(1, new ushort[3], DType.Float32), "Float32 in ushort");
                    var tooShort = new ushort[3];
                    ArgumentException shortError = Throws<ArgumentException>(
                        () => context.Run(2, new ReadOnlySpan<ushort>(new ushort[6]), DType.Float16, new Span<ushort>(tooShort), DType.BFloat16),
                        "short output");
                    Check(shortError.Message.Contains("elements"), shortError.Message);
                    FusedNNException unknown = Throws<FusedNNException>(
                        () => linear.Model.Run(1, new ushort[3], (DType)7), "unknown dtype");
                    Equal(Status.InvalidArgument, unknown.Status, "status");
                    Check(unknown.ErrorMessage.Contains("input_dtype"), unknown.ErrorMessage);
                    FusedNNException device = Throws<FusedNNException>(
                        () => context.RunDevice(1, new IntPtr(16), DType.Float16, 3, new IntPtr(64), DType.BFloat16, 2, IntPtr.Zero),
                        "device run on the CPU");
                    Equal(Status.Unsupported, device.Status, "status");
                }
            });
        }
    }
}
