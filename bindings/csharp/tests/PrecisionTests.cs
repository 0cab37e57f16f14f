// SPDX-License-Identifier: Apache-2.0
// The precision option: the default, the query, values the library refuses, and option structs
// from before the field existed.

using System;
using System.Runtime.InteropServices;
using System.Text;

namespace FusedNN.Tests
{
    internal static partial class Program
    {
        private static void RegisterPrecisionTests()
        {
            Add("precision: defaults to Fp32", () =>
            {
                Equal(Precision.Fp32, new ModelOptions().Precision, "ModelOptions.Precision");
            });

            Add("precision: a CPU model runs fp32 whatever precision is asked", () =>
            {
                var random = new Random("precision");
                foreach (Precision precision in new[] { Precision.Fp32, Precision.Tf32, Precision.Fp16, Precision.Bf16 })
                {
                    var options = new ModelOptions { MaxBatch = 4, Device = Device.Cpu, Precision = precision };
                    Equal(precision, options.Precision, "ModelOptions.Precision");
                    using (var linear = new LinearModel(8, 5, options, random))
                    {
                        Equal(Precision.Fp32, linear.Model.Precision, "Precision asked " + precision);
                        float[] input = random.Floats(3 * 8);
                        double error = Numerics.RelativeError(linear.Model.Run(3, input), linear.Reference(3, input));
                        Check(error <= Tolerance, precision + ": relative error " + error);
                        Equal(Precision.Fp32, linear.Model.Precision, "Precision after a run, asked " + precision);
                    }
                }
            });

            Add("precision: a value outside the enum is InvalidArgument naming options.precision", () =>
            {
                foreach (int value in new[] { 4, -1, 1 << 30 })
                {
                    var options = new ModelOptions { Precision = (Precision)value };
                    var error = Fails(Status.InvalidArgument, () => Model.FromSpec(LinearModel.Spec(4, 3), options), "FromSpec");
                    Contains(error.ErrorMessage, "options.precision", "message");
                    Contains(error.ErrorMessage, value.ToString(), "message");
                }
            });

            Add("precision: an options struct from before the field gets Fp32", () =>
            {
                // A program built against fusednn 0.1: its struct ends where Precision begins, and
                // neither the init call nor model creation touches the bytes after it.
                int older = Marshal.OffsetOf(typeof(NativeModelOptions), "Precision").ToInt32();
                Check(older < Marshal.SizeOf(typeof(NativeModelOptions)), "Precision is not the last field");
                var options = new NativeModelOptions { Precision = (Precision)0x7f7f7f7f };
                unsafe
                {
                    NativeMethods.VerifySuccess(NativeMethods.fdnn_model_options_init(&options, (UIntPtr)older));
                }
                Equal((UIntPtr)older, options.StructSize, "StructSize");
                Equal((Precision)0x7f7f7f7f, options.Precision, "bytes past struct_size");
                byte[] spec = Encoding.UTF8.GetBytes(LinearModel.Spec(4, 3));
                NativeMethods.VerifySuccess(NativeMethods.fdnn_model_create_from_spec(
                    spec, (UIntPtr)spec.Length, ref options, out ModelHandle handle));
                using (handle)
                {
                    NativeMethods.VerifySuccess(NativeMethods.fdnn_model_precision(handle, out Precision precision));
                    Equal(Precision.Fp32, precision, "precision");
                }
            });
        }
    }
}
