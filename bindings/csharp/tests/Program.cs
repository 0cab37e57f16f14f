// SPDX-License-Identifier: Apache-2.0
// The FusedNN test program: a plain console program (no test framework, no NuGet). Each test is
// a method registered in Main; the closing line is "N passed, N failed" and the exit code is
// non-zero when any test failed.
//
// Environment: FUSEDNN_SOURCE_DIR, the repository root (for the header and tests/fixtures);
// FUSEDNN_TEST_SEED to repeat a run's random data; CC for the C compiler of the layout probe.
// An optional first argument runs only the tests whose name contains it.

using System;
using System.Collections.Generic;
using System.IO;

namespace FusedNN.Tests
{
    internal static partial class Program
    {
        private static readonly List<KeyValuePair<string, Action>> Registered = new List<KeyValuePair<string, Action>>();

        private static void Add(string name, Action body)
        {
            Registered.Add(new KeyValuePair<string, Action>(name, body));
        }

        private static int Main(string[] args)
        {
            string filter = args.Length > 0 ? args[0] : null;
            Console.WriteLine("fusednn library " + FusedNNLibrary.VersionString + ", sources " + SourceDir);

            RegisterHeaderTests();
            RegisterErrorTests();
            RegisterRunTests();
            RegisterPrecisionTests();
            RegisterTypedTests();
            RegisterThreadTests();

            int passed = 0;
            int failed = 0;
            foreach (var test in Registered)
            {
                if (filter != null && test.Key.IndexOf(filter, StringComparison.Ordinal) < 0)
                {
                    continue;
                }
                try
                {
                    test.Value();
                    passed++;
                    Console.WriteLine("PASS " + test.Key);
                }
                catch (Exception e)
                {
                    failed++;
                    Console.WriteLine("FAIL " + test.Key + ": " + e);
                }
            }
            Console.WriteLine(passed + " passed, " + failed + " failed");
            return failed == 0 ? 0 : 1;
        }

        /// <summary>The repository root: FUSEDNN_SOURCE_DIR, else four levels above this program.</summary>
        internal static string SourceDir
        {
            get
            {
                string fromEnvironment = Environment.GetEnvironmentVariable("FUSEDNN_SOURCE_DIR");
                if (!string.IsNullOrEmpty(fromEnvironment))
                {
                    return fromEnvironment;
                }
                // bindings/csharp/build/FusedNN.Tests.exe -> the repository root.
                string here = Path.GetDirectoryName(typeof(Program).Assembly.Location);
                return Path.GetFullPath(Path.Combine(here, "..", "..", ".."));
            }
        }

        internal static string FixturesDir => Path.Combine(SourceDir, "tests", "fixtures");

        // ---- Assertions ------------------------------------------------------------------------

        internal sealed class AssertionFailed : Exception
        {
            internal AssertionFailed(string message) : base(message)
            {
            }
        }

        internal static void Check(bool condition, string message)
        {
            if (!condition)
            {
                throw new AssertionFailed(message);
            }
        }

        internal static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
            {
                throw new AssertionFailed(what + ": expected " + expected + ", got " + actual);
            }
        }

        internal static void SameValues(float[] expected, float[] actual, string what)
        {
            Equal(expected.Length, actual.Length, what + " length");
            for (int i = 0; i < expected.Length; i++)
            {
                // Bitwise: the same computation must give the same floats.
                if (BitConverter.ToInt32(BitConverter.GetBytes(expected[i]), 0) !=
                    BitConverter.ToInt32(BitConverter.GetBytes(actual[i]), 0))
                {
                    throw new AssertionFailed(what + ": element " + i + " is " + actual[i] + ", expected " + expected[i]);
                }
            }
        }

        internal static TException Throws<TException>(Action action, string what)
            where TException : Exception
        {
            try
            {
                action();
            }
            catch (TException e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new AssertionFailed(what + ": expected " + typeof(TException).Name + ", got " + e);
            }
            throw new AssertionFailed(what + ": expected " + typeof(TException).Name + ", nothing was thrown");
        }

        /// <summary>The call fails with a FusedNNException of the given status; returns it.</summary>
        internal static FusedNNException Fails(Status status, Action action, string what)
        {
            var error = Throws<FusedNNException>(action, what);
            Equal(status, error.Status, what + " (" + error.Message + ")");
            Check(error.Message.StartsWith(FusedNNLibrary.StatusName(status), StringComparison.Ordinal),
                what + ": message does not start with the status name: " + error.Message);
            return error;
        }

        internal static void Contains(string text, string part, string what)
        {
            Check(text != null && text.IndexOf(part, StringComparison.Ordinal) >= 0,
                what + ": '" + text + "' does not contain '" + part + "'");
        }
    }
}
