# Compiler launcher, warnings and GPU language detection shared by every folder.

find_program(FP8WB_CCACHE ccache)
if(FP8WB_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${FP8WB_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${FP8WB_CCACHE})
endif()

# Warnings on for the project's own code only (third-party headers come in as SYSTEM).
function(fp8wb_warnings target)
  get_target_property(type ${target} TYPE)
  set(scope PRIVATE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    return()
  endif()
  target_compile_options(${target} ${scope}
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
endfunction()

set(FP8WB_HAVE_CUDA OFF)
if(NOT FP8WB_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER)
    # nvcc is often installed outside PATH.
    foreach(candidate /usr/local/cuda/bin/nvcc /usr/bin/nvcc)
      if(EXISTS ${candidate})
        set(CMAKE_CUDA_COMPILER ${candidate})
        break()
      endif()
    endforeach()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # Hopper: H100/H200
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(FP8WB_HAVE_CUDA ON)
    find_package(CUDAToolkit REQUIRED)
  elseif(FP8WB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FP8WB_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()

