# Warnings for our own targets only (dependencies keep theirs).
function(qrt_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter -lineinfo -Xptxas=--warn-on-spills>)
endfunction()
