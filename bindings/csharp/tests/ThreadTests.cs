// SPDX-License-Identifier: Apache-2.0
// One model run from several threads at once gives what one thread gives.

using System;
using System.Collections.Generic;
using System.Threading;

namespace FusedNN.Tests
{
    internal static partial class Program
    {
        private const int Threads = 4;
        private const int Rounds = 200;

        /// <summary>Starts one thread per body, joins them all, and rethrows the first failure.</summary>
        private static void RunThreads(int count, Action<int> body)
        {
            var failures = new List<Exception>();
            var threads = new List<Thread>();
            for (int t = 0; t < count; t++)
            {
                int index = t;
                var thread = new Thread(() =>
                {
                    try
                    {
                        body(index);
                    }
                    catch (Exception e)
                    {
                        lock (failures)
                        {
                            failures.Add(e);
                        }
                    }
                });
                threads.Add(thread);
                thread.Start();
            }
            foreach (Thread thread in threads)
            {
                thread.Join();
            }
            if (failures.Count > 0)
            {
                throw new AssertionFailed(failures.Count + " thread(s) failed; first: " + failures[0]);
            }
        }

        private static void RegisterThreadTests()
        {
            Add("threads: one model run from several threads matches one thread", () =>
            {
                var random = new Random("threads");
                const string spec = "{\"fusednn\": 1, \"input\": {\"shape\": [32]}, \"layers\": [" +
                    "{\"type\": \"Linear\", \"name\": \"fc1\", \"in_features\": 32, \"out_features\": 64}," +
                    "{\"type\": \"GELU\", \"name\": \"act\"}," +
                    "{\"type\": \"Linear\", \"name\": \"fc2\", \"in_features\": 64, \"out_features\": 10}]}";
                using (var model = Model.FromSpec(spec, new ModelOptions { MaxBatch = 16, CpuThreads = 1 }))
                {
                    model.SetWeight("fc1.weight", new long[] { 64, 32 }, random.Floats(64 * 32));
                    model.SetWeight("fc1.bias", new long[] { 64 }, random.Floats(64));
                    model.SetWeight("fc2.weight", new long[] { 10, 64 }, random.Floats(10 * 64));
                    model.SetWeight("fc2.bias", new long[] { 10 }, random.Floats(10));
                    int[] batches = { 1, 5, 16 };
                    var inputs = new float[batches.Length][];
                    var expected = new float[batches.Length][];
                    for (int i = 0; i < batches.Length; i++)
                    {
                        inputs[i] = random.Floats(batches[i] * 32);
                        expected[i] = model.Run(batches[i], inputs[i]);
                    }
                    RunThreads(Threads, thread =>
                    {
                        for (int round = 0; round < Rounds; round++)
                        {
                            int which = (thread + round) % batches.Length;
                            SameValues(expected[which], model.Run(batches[which], inputs[which]), "thread " + thread + " round " + round);
                        }
                    });
                }
            });

            Add("threads: one context per thread matches one thread", () =>
            {
                var random = new Random("contexts");
                using (var linear = new LinearModel(24, 12, new ModelOptions { MaxBatch = 8 }, random))
                {
                    float[] input = random.Floats(8 * 24);
                    float[] expected = linear.Model.Run(8, input);
                    Check(Numerics.RelativeError(expected, linear.Reference(8, input)) <= Tolerance, "reference");
                    var contexts = new Context[Threads];
                    for (int t = 0; t < Threads; t++)
                    {
                        contexts[t] = linear.Model.CreateContext();
                    }
                    try
                    {
                        RunThreads(Threads, thread =>
                        {
                            var output = new float[8 * 12];
                            for (int round = 0; round < Rounds; round++)
                            {
                                contexts[thread].Run(8, input, output);
                                SameValues(expected, output, "thread " + thread + " round " + round);
                            }
                        });
                    }
                    finally
                    {
                        foreach (Context context in contexts)
                        {
                            context.Dispose();
                        }
                    }
                }
            });

            Add("threads: loading weights while a run is in flight is refused", () =>
            {
                // Run a large batch repeatedly on one thread and try to load on another: the guard
                // must refuse whichever call comes second rather than let them race. Whether the
                // two overlap is up to the scheduler, so only the outcomes are checked: every load
                // fails with InvalidOperationException (overlap) or InvalidState (frozen), and a
                // run either succeeds or fails with InvalidOperationException (overlap).
                var random = new Random("guard");
                using (var linear = new LinearModel(256, 256, new ModelOptions { MaxBatch = 64 }, random))
                {
                    float[] input = random.Floats(64 * 256);
                    linear.Model.Run(64, input);
                    int refusedByGuard = 0;
                    int refusedAsFrozen = 0;
                    int runsRefused = 0;
                    var stop = new ManualResetEventSlim(false);
                    var runner = new Thread(() =>
                    {
                        while (!stop.IsSet)
                        {
                            try
                            {
                                linear.Model.Run(64, input);
                            }
                            catch (InvalidOperationException)
                            {
                                runsRefused++;
                            }
                        }
                    });
                    runner.Start();
                    try
                    {
                        for (int i = 0; i < 200; i++)
                        {
                            try
                            {
                                linear.Model.SetWeight("fc.bias", new long[] { 256 }, new float[256]);
                                throw new AssertionFailed("SetWeight succeeded on a frozen model");
                            }
                            catch (InvalidOperationException)
                            {
                                refusedByGuard++;
                            }
                            catch (FusedNNException e) when (e.Status == Status.InvalidState)
                            {
                                refusedAsFrozen++;
                            }
                        }
                    }
                    finally
                    {
                        stop.Set();
                        runner.Join();
                    }
                    Equal(200, refusedByGuard + refusedAsFrozen, "loads refused");
                    Console.WriteLine("  loads refused by the guard " + refusedByGuard + ", as frozen " + refusedAsFrozen +
                        "; runs refused by the guard " + runsRefused);
                }
            });
        }
    }
}
