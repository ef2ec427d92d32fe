# Tests that run several ranks under the MPI launcher.
#
#   qrt_add_mpi_test(<name> NP <ranks> COMMAND <target or program> [args...] [LABEL <label>] [TIMEOUT <seconds>])
#
# runs `mpiexec -n <ranks> <command> [args...]` as a ctest test (default label unit, default timeout 60 s). A
# target name as the program is replaced by its file. Nothing is registered in a build without MPI.
#
# Settings that let Open MPI run on a CI machine: as root, in a container without a network, with more ranks
# than cores (4 ranks on 2 cores):
#   OMPI_ALLOW_RUN_AS_ROOT=1 + OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   mpirun refuses to run as root otherwise
#   --oversubscribe                        more ranks than cores ("not enough slots" otherwise)
#   OMPI_MCA_pml=ob1, OMPI_MCA_btl=self,<shared memory>   ranks talk through shared memory only: no probing of
#                                          network or InfiniBand devices (slow, or warnings where they exist)
#   OMPI_MCA_btl_<shm>_single_copy_mechanism=none   containers often forbid the cross-process copies (CMA,
#                                          ptrace-based) used for large messages
#   --timeout <seconds>                    mpirun itself ends a job that hangs (killing every rank), so a hung
#                                          collective never leaves ranks spinning after ctest gives up
# Other MPI implementations (MPICH, Intel MPI) need none of these and get the plain command line.
#
# For scripts that launch ranks themselves, qrt_mpi_launch_command(<out_var> NP <ranks> [TIMEOUT <s>]) gives the
# launcher and its flags, and QRT_MPI_TEST_ENVIRONMENT the environment (NAME=value list for ENVIRONMENT).

set(QRT_MPI_IS_OPEN_MPI OFF)
set(QRT_MPI_TEST_ENVIRONMENT)
if(QRT_HAVE_MPI AND MPIEXEC_EXECUTABLE)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _qrt_mpiexec_version
                  ERROR_VARIABLE _qrt_mpiexec_version RESULT_VARIABLE _qrt_mpiexec_rc TIMEOUT 20)
  # "mpiexec (OpenRTE) 4.1.4" (Open MPI 4), "mpiexec (Open MPI) 5.0.3"; both name open-mpi.org.
  if(_qrt_mpiexec_version MATCHES "OpenRTE|Open MPI|open-mpi\\.org")
    set(QRT_MPI_IS_OPEN_MPI ON)
    string(REGEX MATCH "([0-9]+)\\.[0-9]+\\.[0-9]+" _qrt_ompi_version "${_qrt_mpiexec_version}")
    set(_qrt_ompi_major ${CMAKE_MATCH_1})
    if(_qrt_ompi_major AND _qrt_ompi_major GREATER_EQUAL 5)
      set(_qrt_ompi_shm sm)  # Open MPI 5 renamed the shared-memory transport
    else()
      set(_qrt_ompi_shm vader)
    endif()
    set(QRT_MPI_TEST_ENVIRONMENT
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
        OMPI_MCA_btl=self,${_qrt_ompi_shm} OMPI_MCA_btl_${_qrt_ompi_shm}_single_copy_mechanism=none)
  endif()
endif()

function(qrt_mpi_launch_command out_var)
  cmake_parse_arguments(ARG "" "NP;TIMEOUT" "" ${ARGN})
  if(NOT ARG_NP)
    message(FATAL_ERROR "qrt_mpi_launch_command: NP <ranks> is required")
  endif()
  set(numproc_flag ${MPIEXEC_NUMPROC_FLAG})
  if(NOT numproc_flag)
    set(numproc_flag -n)
  endif()
  set(command ${MPIEXEC_EXECUTABLE} ${numproc_flag} ${ARG_NP})
  if(QRT_MPI_IS_OPEN_MPI)
    list(APPEND command --oversubscribe)
    if(ARG_TIMEOUT)
      list(APPEND command --timeout ${ARG_TIMEOUT})
    endif()
  endif()
  list(APPEND command ${MPIEXEC_PREFLAGS})
  set(${out_var} ${command} PARENT_SCOPE)
endfunction()

function(qrt_add_mpi_test name)
  cmake_parse_arguments(ARG "" "NP;LABEL;TIMEOUT" "COMMAND" ${ARGN})
  if(NOT QRT_HAVE_MPI)
    return()
  endif()
  if(NOT MPIEXEC_EXECUTABLE)
    message(WARNING "qrt_add_mpi_test(${name}): MPI was found but not its launcher (mpiexec); test not registered")
    return()
  endif()
  if(NOT ARG_NP OR NOT ARG_COMMAND)
    message(FATAL_ERROR "qrt_add_mpi_test(${name}): NP <ranks> and COMMAND <program> [args...] are required")
  endif()
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 60)
  endif()
  list(POP_FRONT ARG_COMMAND program)
  if(TARGET ${program})
    set(program $<TARGET_FILE:${program}>)
  endif()
  # mpirun's own limit ends a hung job first; ctest's, a little later, is the backstop.
  qrt_mpi_launch_command(launcher NP ${ARG_NP} TIMEOUT ${ARG_TIMEOUT})
  math(EXPR ctest_timeout "${ARG_TIMEOUT} + 15")
  set(environment ${QRT_MPI_TEST_ENVIRONMENT} QRT_TEST_DATA=${QRT_TEST_DATA})
  add_test(NAME ${name} COMMAND ${launcher} ${program} ${MPIEXEC_POSTFLAGS} ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ctest_timeout}
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" ENVIRONMENT "${environment}")
endfunction()
