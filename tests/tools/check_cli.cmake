# SPDX-License-Identifier: Apache-2.0
# cmake -DCLI=<fusednn> -DVERSION=<x.y.z> -DMODEL=<bundle> [-DEMULATOR=<command>] -P check_cli.cmake
# EMULATOR (a list) runs a cross-built CLI: qemu-aarch64 and its arguments for the aarch64 build.
# Each case runs the CLI and checks its exit status, what stdout and stderr contain, and that the
# other stream stays empty where the convention says so.
set(failures 0)

# expect(<name> <status> <stdout regex or ""> <stderr regex or ""> <arguments...>)
# A regex of "EMPTY" asks for an empty stream.
function(expect name status out_regex err_regex)
  execute_process(COMMAND ${EMULATOR} ${CLI} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  set(problems "")
  if(NOT rc STREQUAL status)
    string(APPEND problems " status ${rc}, expected ${status};")
  endif()
  foreach(stream out err)
    set(regex "${${stream}_regex}")
    if(regex STREQUAL "EMPTY")
      if(NOT "${${stream}}" STREQUAL "")
        string(APPEND problems " std${stream} not empty;")
      endif()
    elseif(NOT regex STREQUAL "" AND NOT "${${stream}}" MATCHES "${regex}")
      string(APPEND problems " std${stream} does not match '${regex}';")
    endif()
  endforeach()
  if(problems)
    message(SEND_ERROR "${name}:${problems}\n  stdout: ${out}\n  stderr: ${err}")
  else()
    message(STATUS "${name}: ok")
  endif()
endfunction()

string(REPLACE "." "\\." version_regex "${VERSION}")

expect(Help 0 "^usage: fusednn info MODEL" EMPTY --help)
expect(ShortHelp 0 "^usage: fusednn info MODEL" EMPTY -h)
expect(HelpAfterACommand 0 "^usage: " EMPTY info ${MODEL} --help)
expect(Version 0 "^fusednn ${version_regex}\n$" EMPTY --version)
expect(NoArguments 2 EMPTY "^fusednn: no command given; use info or bench\nrun 'fusednn --help' for usage")
expect(UnknownCommand 2 EMPTY "unknown command 'frobnicate'" frobnicate ${MODEL})
expect(MissingModel 2 EMPTY "info needs a MODEL file" info)
expect(UnknownFlag 2 EMPTY "unknown option '--bogus'" info ${MODEL} --bogus)
expect(MissingValue 2 EMPTY "--batch needs a value" info ${MODEL} --batch)
expect(BadNumber 2 EMPTY "--batch is 'abc'" bench ${MODEL} --batch abc)
expect(NegativeNumber 2 EMPTY "--iterations is '-3'" bench ${MODEL} --iterations -3)
expect(TrailingJunk 2 EMPTY "--batch is '8x'" info ${MODEL} --plan --batch 8x)
expect(BadDevice 2 EMPTY "--device is 'gpu'; use cpu, cuda or auto" info ${MODEL} --device gpu)
expect(BadPrecision 2 EMPTY "--precision is 'fp8'" info ${MODEL} --precision fp8)
expect(PlanOnBench 2 EMPTY "--plan applies to info only" bench ${MODEL} --plan)
expect(JsonWithoutPlan 2 EMPTY "--json applies to info --plan only" info ${MODEL} --json)
expect(MissingFile 1 EMPTY "missing\\.json" info missing.json)
expect(Info 0 "parameters" EMPTY info ${MODEL})
# tiny_mlp: fc1 + BatchNorm (folded) + ReLU, then fc2. 8 rows on a thread take the packed GEMM.
expect(PlanTable 0 "batch 8 \\(max 8\\).*layers: fc1\\+bn\\+relu_2.*form: packed GEMM.*fused: ReLU.*why: 8 rows"
       EMPTY info ${MODEL} --plan --batch 8 --device cpu --precision fp32)
expect(PlanJson 0 "\"steps\": \\[.*\"form\": \"dot products" EMPTY
       info ${MODEL} --plan --json --batch 2)
