// SPDX-License-Identifier: Apache-2.0
// Test helpers: random data, an in-memory Linear model with an independent reference, and a
// small F32-only safetensors reader (with as much JSON as its header needs).

using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Text;

namespace FusedNN.Tests
{
    /// <summary>xorshift: fresh data for each run, repeatable from the printed seed.</summary>
    internal sealed class Random
    {
        private ulong state;

        internal Random(string what)
        {
            string fromEnvironment = Environment.GetEnvironmentVariable("FUSEDNN_TEST_SEED");
            ulong seed;
            if (string.IsNullOrEmpty(fromEnvironment) || !ulong.TryParse(fromEnvironment, out seed))
            {
                seed = (ulong)DateTime.UtcNow.Ticks;
            }
            Console.WriteLine("  " + what + ": FUSEDNN_TEST_SEED=" + seed);
            state = seed | 1;
        }

        /// <summary>Uniform in [-1, 1).</summary>
        internal float Next()
        {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            return (float)(state >> 40) / (1 << 24) * 2f - 1f;
        }

        internal float[] Floats(int count)
        {
            var values = new float[count];
            for (int i = 0; i < count; i++)
            {
                values[i] = Next();
            }
            return values;
        }
    }

    /// <summary>One Linear layer with random weights set through SetWeight, and y = W x + b in double.</summary>
    internal sealed class LinearModel : IDisposable
    {
        internal LinearModel(int inputs, int outputs, ModelOptions options, Random random)
        {
            Inputs = inputs;
            Outputs = outputs;
            Model = Model.FromSpec(Spec(inputs, outputs), options);
            Weight = random.Floats(outputs * inputs);
            Bias = random.Floats(outputs);
            Model.SetWeight("fc.weight", new long[] { outputs, inputs }, Weight);
            Model.SetWeight("fc.bias", new long[] { outputs }, Bias);
        }

        internal Model Model { get; }
        internal float[] Weight { get; }
        internal float[] Bias { get; }
        internal int Inputs { get; }
        internal int Outputs { get; }

        internal static string Spec(int inputs, int outputs)
        {
            return "{\"fusednn\": 1, \"input\": {\"shape\": [" + inputs + "]}, \"layers\": [" +
                   "{\"type\": \"Linear\", \"name\": \"fc\", \"in_features\": " + inputs +
                   ", \"out_features\": " + outputs + "}]}";
        }

        internal float[] Reference(int batch, float[] input)
        {
            var output = new float[batch * Outputs];
            for (int b = 0; b < batch; b++)
            {
                for (int row = 0; row < Outputs; row++)
                {
                    double sum = Bias[row];
                    for (int k = 0; k < Inputs; k++)
                    {
                        sum += (double)Weight[row * Inputs + k] * input[b * Inputs + k];
                    }
                    output[b * Outputs + row] = (float)sum;
                }
            }
            return output;
        }

        public void Dispose()
        {
            Model.Dispose();
        }
    }

    internal static class Numerics
    {
        /// <summary>Largest absolute difference relative to the largest magnitude in expected.</summary>
        internal static double RelativeError(float[] actual, float[] expected)
        {
            if (actual.Length != expected.Length)
            {
                throw new Program.AssertionFailed("lengths differ: " + actual.Length + " vs " + expected.Length);
            }
            double scale = float.Epsilon;
            double worst = 0;
            for (int i = 0; i < expected.Length; i++)
            {
                scale = Math.Max(scale, Math.Abs(expected[i]));
                double difference = Math.Abs((double)actual[i] - expected[i]);
                if (double.IsNaN(difference) || double.IsInfinity(actual[i]))
                {
                    return double.PositiveInfinity;
                }
                worst = Math.Max(worst, difference);
            }
            return worst / scale;
        }
    }

    internal sealed class Tensor
    {
        internal long[] Shape;
        internal float[] Data;
    }

    /// <summary>safetensors: an 8-byte little-endian header length, a JSON header, raw data. F32 only.</summary>
    internal static class SafeTensors
    {
        internal static Dictionary<string, Tensor> Read(string path)
        {
            byte[] bytes = File.ReadAllBytes(path);
            long headerLength = BitConverter.ToInt64(bytes, 0);
            string header = Encoding.UTF8.GetString(bytes, 8, (int)headerLength);
            int dataStart = 8 + (int)headerLength;
            var entries = (Dictionary<string, object>)new JsonReader(header).Value();
            var tensors = new Dictionary<string, Tensor>();
            foreach (var entry in entries)
            {
                if (entry.Key == "__metadata__")
                {
                    continue;
                }
                var fields = (Dictionary<string, object>)entry.Value;
                if ((string)fields["dtype"] != "F32")
                {
                    throw new InvalidDataException(entry.Key + ": only F32 is read, got " + fields["dtype"]);
                }
                var shapeList = (List<object>)fields["shape"];
                var offsets = (List<object>)fields["data_offsets"];
                var shape = new long[shapeList.Count];
                long count = 1;
                for (int i = 0; i < shape.Length; i++)
                {
                    shape[i] = (long)(double)shapeList[i];
                    count *= shape[i];
                }
                int begin = (int)(double)offsets[0];
                int end = (int)(double)offsets[1];
                if ((end - begin) != count * 4)
                {
                    throw new InvalidDataException(entry.Key + ": data size does not match the shape");
                }
                var data = new float[count];
                Buffer.BlockCopy(bytes, dataStart + begin, data, 0, end - begin);
                if (!BitConverter.IsLittleEndian)
                {
                    throw new NotSupportedException("big-endian hosts");
                }
                tensors[entry.Key] = new Tensor { Shape = shape, Data = data };
            }
            return tensors;
        }
    }

    /// <summary>
    /// JSON into Dictionary&lt;string, object&gt;, List&lt;object&gt;, string, double, bool and null.
    /// </summary>
    internal sealed class JsonReader
    {
        private readonly string text;
        private int at;

        internal JsonReader(string text)
        {
            this.text = text;
        }

        private void SkipSpace()
        {
            while (at < text.Length && char.IsWhiteSpace(text[at]))
            {
                at++;
            }
        }

        private void Expect(char wanted)
        {
            SkipSpace();
            if (at >= text.Length || text[at] != wanted)
            {
                throw new InvalidDataException("JSON: expected '" + wanted + "' at " + at);
            }
            at++;
        }

        internal object Value()
        {
            SkipSpace();
            char c = text[at];
            if (c == '{')
            {
                at++;
                var items = new Dictionary<string, object>();
                SkipSpace();
                if (text[at] == '}')
                {
                    at++;
                    return items;
                }
                while (true)
                {
                    SkipSpace();
                    var key = (string)Value();
                    Expect(':');
                    items[key] = Value();
                    SkipSpace();
                    char next = text[at++];
                    if (next == '}')
                    {
                        return items;
                    }
                }
            }
            if (c == '[')
            {
                at++;
                var items = new List<object>();
                SkipSpace();
                if (text[at] == ']')
                {
                    at++;
                    return items;
                }
                while (true)
                {
                    items.Add(Value());
                    SkipSpace();
                    char next = text[at++];
                    if (next == ']')
                    {
                        return items;
                    }
                }
            }
            if (c == '"')
            {
                at++;
                var value = new StringBuilder();
                while (text[at] != '"')
                {
                    if (text[at] == '\\')
                    {
                        at++;
                        char escaped = text[at];
                        if (escaped == 'u')
                        {
                            value.Append((char)Convert.ToInt32(text.Substring(at + 1, 4), 16));
                            at += 4;
                        }
                        else
                        {
                            value.Append(escaped == 'n' ? '\n' : escaped == 't' ? '\t' : escaped == 'r' ? '\r' : escaped);
                        }
                    }
                    else
                    {
                        value.Append(text[at]);
                    }
                    at++;
                }
                at++;
                return value.ToString();
            }
            if (text.Substring(at).StartsWith("true", StringComparison.Ordinal))
            {
                at += 4;
                return true;
            }
            if (text.Substring(at).StartsWith("false", StringComparison.Ordinal))
            {
                at += 5;
                return false;
            }
            if (text.Substring(at).StartsWith("null", StringComparison.Ordinal))
            {
                at += 4;
                return null;
            }
            int start = at;
            while (at < text.Length && "+-.eE0123456789".IndexOf(text[at]) >= 0)
            {
                at++;
            }
            return double.Parse(text.Substring(start, at - start), NumberStyles.Float, CultureInfo.InvariantCulture);
        }
    }
}
