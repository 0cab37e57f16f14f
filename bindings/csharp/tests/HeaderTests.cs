// SPDX-License-Identifier: Apache-2.0
// Fails when include/fusednn/fusednn.h and the P/Invoke declarations disagree: every C function
// must have a DllImport with compatible parameter and return types, every enum constant a C#
// member with the same value, and every struct the same fields at the same offsets and size
// (measured by a C program the test compiles against the header).

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Text;
using System.Text.RegularExpressions;

namespace FusedNN.Tests
{
    internal static partial class Program
    {
        private static readonly Dictionary<string, Type> CTypes = new Dictionary<string, Type>
        {
            { "void", typeof(void) },
            { "char", typeof(byte) },
            { "float", typeof(float) },
            { "int32_t", typeof(int) },
            { "uint32_t", typeof(uint) },
            { "int64_t", typeof(long) },
            { "uint64_t", typeof(ulong) },
            { "double", typeof(double) },
            { "size_t", typeof(UIntPtr) },
            { "fdnn_status", typeof(Status) },
            { "fdnn_device", typeof(Device) },
            { "fdnn_dtype", typeof(NativeDType) },
            { "fdnn_precision", typeof(Precision) },
            { "fdnn_explain_format", typeof(ExplainFormat) },
            { "fdnn_host_io", typeof(HostIo) },
            { "fdnn_model_options", typeof(NativeModelOptions) },
            { "fdnn_shape", typeof(NativeShape) },
            { "fdnn_memory_info", typeof(NativeMemoryInfo) },
            { "fdnn_layer_info", typeof(NativeLayerInfo) },
            { "fdnn_model", typeof(ModelHandle) },
            { "fdnn_context", typeof(ContextHandle) },
        };

        private static string HeaderPath => Path.Combine(SourceDir, "include", "fusednn", "fusednn.h");

        private static string HeaderCode()
        {
            string text = File.ReadAllText(HeaderPath);
            text = Regex.Replace(text, @"/\*.*?\*/", " ", RegexOptions.Singleline);
            text = Regex.Replace(text, @"//[^\n]*", " ");
            return text;
        }

        private static string Squash(string name) => name.Replace("_", "").ToUpperInvariant();

        /// <summary>A C declaration "const fdnn_shape* name": its base type and pointer depth.</summary>
        private static void SplitCType(string declaration, out string baseType, out int pointers)
        {
            string type = Regex.Replace(declaration, @"\b(const|FDNN_API|struct|enum)\b", " ");
            pointers = type.Count(c => c == '*');
            baseType = type.Replace("*", " ").Split(new[] { ' ', '\t', '\n', '\r' }, StringSplitOptions.RemoveEmptyEntries)[0];
        }

        /// <summary>Whether a C# parameter or return type can carry the C type.</summary>
        private static bool Compatible(string baseType, int pointers, Type csharp)
        {
            if (!CTypes.TryGetValue(baseType, out Type mapped))
            {
                throw new AssertionFailed("no C# mapping for C type '" + baseType + "'; add one to the test");
            }
            bool isHandle = mapped == typeof(ModelHandle) || mapped == typeof(ContextHandle);
            if (pointers == 0)
            {
                return csharp == mapped;
            }
            if (pointers == 1)
            {
                if (csharp == typeof(IntPtr))
                {
                    return true;
                }
                if (isHandle)
                {
                    return csharp == mapped;
                }
                if (mapped == typeof(void))
                {
                    return csharp == typeof(void*);
                }
                Type element = csharp.IsByRef || csharp.IsPointer || csharp.IsArray ? csharp.GetElementType() : null;
                return element == mapped;
            }
            return pointers == 2 && isHandle && csharp.IsByRef && csharp.GetElementType() == mapped;
        }

        private static void RegisterHeaderTests()
        {
            Add("header: every function has a matching DllImport", () =>
            {
                var imports = typeof(NativeMethods)
                    .GetMethods(BindingFlags.Static | BindingFlags.NonPublic | BindingFlags.Public)
                    .Where(m => m.GetCustomAttributes(typeof(DllImportAttribute), false).Length > 0)
                    .ToDictionary(m => m.Name);
                var problems = new List<string>();
                var seen = new HashSet<string>();
                foreach (Match function in Regex.Matches(HeaderCode(), @"FDNN_API\s+([^;(]*?)\b(fdnn_\w+)\s*\(([^)]*)\)\s*;"))
                {
                    string name = function.Groups[2].Value;
                    seen.Add(name);
                    if (!imports.TryGetValue(name, out MethodInfo import))
                    {
                        problems.Add(name + " is in the header but has no DllImport");
                        continue;
                    }
                    SplitCType(function.Groups[1].Value, out string returnBase, out int returnPointers);
                    if (!Compatible(returnBase, returnPointers, import.ReturnType))
                    {
                        problems.Add(name + " returns " + function.Groups[1].Value.Trim() + " but the DllImport returns " + import.ReturnType);
                    }
                    string parameterText = function.Groups[3].Value.Trim();
                    string[] parameters = parameterText == "void" ? new string[0] : parameterText.Split(',');
                    ParameterInfo[] declared = import.GetParameters();
                    if (parameters.Length != declared.Length)
                    {
                        problems.Add(name + " takes " + parameters.Length + " parameters in C, " + declared.Length + " in C#");
                        continue;
                    }
                    for (int i = 0; i < parameters.Length; i++)
                    {
                        // Drop the parameter name: the last identifier.
                        string cType = Regex.Replace(parameters[i].Trim(), @"\w+$", "");
                        SplitCType(cType, out string baseType, out int pointers);
                        if (!Compatible(baseType, pointers, declared[i].ParameterType))
                        {
                            problems.Add(name + " parameter " + i + ": C '" + parameters[i].Trim() + "', C# " + declared[i].ParameterType);
                        }
                    }
                }
                foreach (string name in imports.Keys.Where(n => !seen.Contains(n)))
                {
                    problems.Add(name + " has a DllImport but is not in the header");
                }
                Check(seen.Count >= 20, "parsed only " + seen.Count + " functions from the header");
                Check(problems.Count == 0, string.Join("\n  ", new[] { "" }.Concat(problems)));
            });

            Add("header: enums, structs and layouts match the C compiler", () =>
            {
                string code = HeaderCode();
                var probe = new StringBuilder(
                    "#include <stddef.h>\n#include <stdio.h>\n#include \"fusednn/fusednn.h\"\nint main(void) {\n");
                var expected = new List<KeyValuePair<string, long>>();
                var problems = new List<string>();

                foreach (Match enumeration in Regex.Matches(code, @"typedef\s+enum\s+\w+\s*\{([^}]*)\}\s*(\w+)\s*;"))
                {
                    string cName = enumeration.Groups[2].Value;
                    if (!CTypes.TryGetValue(cName, out Type csharp) || !csharp.IsEnum)
                    {
                        problems.Add("enum " + cName + " has no C# enum");
                        continue;
                    }
                    probe.Append("  printf(\"" + cName + " %zu\\n\", sizeof(" + cName + "));\n");
                    expected.Add(new KeyValuePair<string, long>(cName, Marshal.SizeOf(Enum.GetUnderlyingType(csharp))));
                    var members = Enum.GetNames(csharp).ToDictionary(Squash, n => Convert.ToInt64(Enum.Parse(csharp, n)));
                    string prefix = Regex.Replace(cName, "^fdnn_", "FDNN_").ToUpperInvariant() + "_";
                    var constants = new HashSet<string>();
                    foreach (string item in enumeration.Groups[1].Value.Split(','))
                    {
                        string constant = item.Split('=')[0].Trim();
                        if (constant.Length == 0)
                        {
                            continue;
                        }
                        string member = Squash(constant.Substring(prefix.Length));
                        constants.Add(member);
                        if (!members.TryGetValue(member, out long value))
                        {
                            problems.Add(constant + " has no member in C# " + csharp.Name);
                            continue;
                        }
                        probe.Append("  printf(\"" + constant + " %lld\\n\", (long long)" + constant + ");\n");
                        expected.Add(new KeyValuePair<string, long>(constant, value));
                    }
                    foreach (string member in members.Keys.Where(m => !constants.Contains(m)))
                    {
                        problems.Add("C# " + csharp.Name + " has " + member + ", which " + cName + " lacks");
                    }
                }

                int structs = 0;
                foreach (Match structure in Regex.Matches(code, @"typedef\s+struct\s+\w+\s*\{([^}]*)\}\s*(\w+)\s*;"))
                {
                    structs++;
                    string cName = structure.Groups[2].Value;
                    if (!CTypes.TryGetValue(cName, out Type csharp) || !csharp.IsValueType)
                    {
                        problems.Add("struct " + cName + " has no C# struct");
                        continue;
                    }
                    probe.Append("  printf(\"" + cName + " %zu\\n\", sizeof(" + cName + "));\n");
                    expected.Add(new KeyValuePair<string, long>(cName, Marshal.SizeOf(csharp)));
                    var fields = csharp.GetFields(BindingFlags.Instance | BindingFlags.Public | BindingFlags.NonPublic)
                        .ToDictionary(f => Squash(f.Name), f => f.Name);
                    var cFields = new HashSet<string>();
                    foreach (string declaration in structure.Groups[1].Value.Split(';'))
                    {
                        Match field = Regex.Match(declaration, @"(\w+)\s*(\[[^\]]*\])?\s*$");
                        if (declaration.Trim().Length == 0 || !field.Success)
                        {
                            continue;
                        }
                        string cField = field.Groups[1].Value;
                        cFields.Add(Squash(cField));
                        if (!fields.TryGetValue(Squash(cField), out string csField))
                        {
                            problems.Add(cName + "." + cField + " has no field in C# " + csharp.Name);
                            continue;
                        }
                        string key = cName + "." + cField;
                        probe.Append("  printf(\"" + key + " %zu\\n\", offsetof(" + cName + ", " + cField + "));\n");
                        expected.Add(new KeyValuePair<string, long>(key, Marshal.OffsetOf(csharp, csField).ToInt64()));
                    }
                    foreach (string field in fields.Keys.Where(f => !cFields.Contains(f)))
                    {
                        problems.Add("C# " + csharp.Name + " has field " + field + ", which " + cName + " lacks");
                    }
                }
                Check(structs >= 4, "parsed only " + structs + " structs from the header");
                probe.Append("  return 0;\n}\n");

                Dictionary<string, long> measured = RunProbe(probe.ToString());
                foreach (var fact in expected)
                {
                    if (!measured.TryGetValue(fact.Key, out long c) || c != fact.Value)
                    {
                        problems.Add(fact.Key + ": C says " + (measured.ContainsKey(fact.Key) ? c.ToString() : "nothing") + ", C# says " + fact.Value);
                    }
                }
                Check(problems.Count == 0, string.Join("\n  ", new[] { "" }.Concat(problems)));
            });

            Add("header: version constants match FusedNNLibrary.HeaderVersion", () =>
            {
                string code = File.ReadAllText(HeaderPath);
                Func<string, int> define = name => int.Parse(Regex.Match(code, @"#define\s+" + name + @"\s+(\d+)").Groups[1].Value);
                Equal(new Version(define("FDNN_VERSION_MAJOR"), define("FDNN_VERSION_MINOR"), define("FDNN_VERSION_PATCH")),
                    FusedNNLibrary.HeaderVersion, "header version");
                Equal(define("FDNN_MAX_RANK"), NativeShape.MaxRank, "FDNN_MAX_RANK");
            });
        }

        /// <summary>Compiles and runs a C program against the header; reads its "key value" lines.</summary>
        private static Dictionary<string, long> RunProbe(string source)
        {
            string directory = Path.Combine(Path.GetTempPath(), "fusednn-csharp-probe-" + Process.GetCurrentProcess().Id);
            Directory.CreateDirectory(directory);
            string sourcePath = Path.Combine(directory, "probe.c");
            string binaryPath = Path.Combine(directory, "probe");
            File.WriteAllText(sourcePath, source);
            string compiler = Environment.GetEnvironmentVariable("CC");
            if (string.IsNullOrEmpty(compiler))
            {
                compiler = "cc";
            }
            string include = Path.Combine(SourceDir, "include");
            RunProcess(compiler, "-std=c99 -Wall -Werror -I \"" + include + "\" \"" + sourcePath + "\" -o \"" + binaryPath + "\"");
            string output = RunProcess(binaryPath, "");
            Directory.Delete(directory, true);
            var facts = new Dictionary<string, long>();
            foreach (string line in output.Split(new[] { '\n' }, StringSplitOptions.RemoveEmptyEntries))
            {
                string[] words = line.Split(' ');
                facts[words[0]] = long.Parse(words[1]);
            }
            return facts;
        }

        private static string RunProcess(string program, string arguments)
        {
            var start = new ProcessStartInfo(program, arguments)
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            using (Process process = Process.Start(start))
            {
                string output = process.StandardOutput.ReadToEnd();
                string errors = process.StandardError.ReadToEnd();
                process.WaitForExit();
                Check(process.ExitCode == 0, program + " " + arguments + " failed:\n" + errors);
                return output;
            }
        }
    }
}
