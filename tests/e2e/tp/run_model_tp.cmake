# run-model split among ranks must print exactly what the single-rank run prints (ids of a seeded sampled
# continuation), once; a model that does not exist must give one "error:" line and a non-zero exit.
#   cmake -DLAUNCHER=<mpirun|flags> -DRUN_MODEL=<run-model> -DMODEL=<stories260K.gguf> [-DEXTRA=<arg|arg...>]
#         -P run_model_tp.cmake
# EXTRA: more run-model arguments for both runs, e.g. "--device|cuda" (the gpu-sim variant, tests/simt).
if(NOT EXISTS "${MODEL}")
  message(FATAL_ERROR "test data unavailable: ${MODEL}")  # ctest reports it as skipped
endif()
string(REPLACE "|" ";" launcher "${LAUNCHER}")
set(args "${MODEL}" -p "Once upon a time" -n 24 --temp 0.8 --top-k 20 --seed 7 --ids)
if(EXTRA)
  string(REPLACE "|" ";" extra "${EXTRA}")
  list(APPEND args ${extra})
endif()

execute_process(COMMAND "${RUN_MODEL}" ${args} OUTPUT_VARIABLE single ERROR_VARIABLE single_err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "single-rank run-model failed (${rc}):\n${single_err}")
endif()
execute_process(COMMAND ${launcher} "${RUN_MODEL}" ${args} OUTPUT_VARIABLE split ERROR_VARIABLE split_err
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run-model under ${launcher} failed (${rc}):\n${split}\n${split_err}")
endif()
if(NOT split STREQUAL single)
  message(FATAL_ERROR "split run printed\n${split}\nbut the single-rank run printed\n${single}")
endif()
string(REGEX MATCHALL "generation: " reports "${split_err}")
list(LENGTH reports n)
if(NOT n EQUAL 1 OR NOT split_err MATCHES "split among [0-9]+ ranks")
  message(FATAL_ERROR "expected one report from rank 0 naming the split, got:\n${split_err}")
endif()

execute_process(COMMAND ${launcher} "${RUN_MODEL}" "${MODEL}.missing" -p "x" OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE rc)
string(REGEX MATCHALL "error: " errors "${err}")
list(LENGTH errors n)
if(rc EQUAL 0 OR NOT n EQUAL 1)
  message(FATAL_ERROR "a missing model should give one error line and a non-zero exit; got ${rc}:\n${out}\n${err}")
endif()
message("identical ids from 1 and several ranks; one error line for a missing model")
