# fp8wb_checkpoint: the checkpoint readers, writer and analysis. No torch, so that the
# fuzzers (tests/fuzz, built with clang and sanitizers) build it alone.
add_library(fp8wb_checkpoint STATIC
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/file_io.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/safetensors_header.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/safetensors_to_float.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/checkpoint_analysis.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/checkpoint_recommend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/checkpoint_export.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/torch_pickle.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/torch_pickle_vm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/torch_pickle_rebuild.cpp)
target_include_directories(fp8wb_checkpoint PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(fp8wb_checkpoint PUBLIC fp8wb::kernels PRIVATE nlohmann_json::nlohmann_json)
set_target_properties(fp8wb_checkpoint PROPERTIES POSITION_INDEPENDENT_CODE ON)
fp8wb_warnings(fp8wb_checkpoint)
# Analysis on the GPU where the CUDA kernels are built (never in the fuzzers' build).
if(FP8WB_HAVE_CUDA)
  target_link_libraries(fp8wb_checkpoint PUBLIC fp8wb::kernels_cuda)
  # On the one source that uses it: the others compile as without nvcc (ccache hits).
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/src/checkpoint/checkpoint_analysis.cpp APPEND PROPERTY
               COMPILE_DEFINITIONS FP8WB_WITH_CUDA_KERNELS)
endif()
