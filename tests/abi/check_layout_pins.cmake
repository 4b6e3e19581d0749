# cmake -DC_COMPILER=cc -DSDK_INCLUDE=sdk/include -DPINS=core/plugin/abi_layout.c -DWORK=scratch-folder -P this file
# Fails unless the pins compile with the SDK's headers as they are and fail, on the pin of the moved field, with
# each bent copy below (a field swapped with its neighbour, one inserted mid-table, one widened).
foreach(variable C_COMPILER SDK_INCLUDE PINS WORK)
  if(NOT ${variable})
    message(FATAL_ERROR "check_layout_pins.cmake needs -D${variable}=...")
  endif()
endforeach()

function(compile_pins include_dir result output)
  execute_process(COMMAND ${C_COMPILER} -std=c11 -fsyntax-only -I${include_dir} ${PINS}
                  RESULT_VARIABLE status OUTPUT_VARIABLE text ERROR_VARIABLE text)
  set(${result} ${status} PARENT_SCOPE)
  set(${output} "${text}" PARENT_SCOPE)
endfunction()

# A copy of the headers where HEADER's text matching REGEX becomes REPLACEMENT; the pins must fail naming EXPECTED.
function(expect_bent_header_fails name header regex replacement expected)
  set(folder ${WORK}/${name})
  file(REMOVE_RECURSE ${folder})
  file(COPY ${SDK_INCLUDE}/strata DESTINATION ${folder} FILES_MATCHING PATTERN "*.h")
  file(READ ${folder}/strata/${header} text)
  string(REGEX REPLACE "${regex}" "${replacement}" bent "${text}")
  if(bent STREQUAL text)
    message(FATAL_ERROR "${name}: nothing in strata/${header} matches ${regex}; update this check to the header")
  endif()
  file(WRITE ${folder}/strata/${header} "${bent}")
  compile_pins(${folder} status text)
  if(status EQUAL 0)
    message(FATAL_ERROR "${name}: the pins compile with this strata/${header}, so they would not catch it")
  endif()
  string(FIND "${text}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${name}: the pins fail, but not with \"${expected}\":\n${text}")
  endif()
  message(STATUS "${name}: fails with \"${expected}\"")
endfunction()

compile_pins(${SDK_INCLUDE} status text)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the pins fail with the SDK's headers as they are:\n${text}")
endif()

expect_bent_header_fails(swapped quant.h "(\n *uint32_t block_elements;[^\n]*)(\n *uint32_t block_bytes;[^\n]*)"
                         "\\2\\1" "strata_quant_type.block_elements moved")
expect_bent_header_fails(inserted backend.h "(\n *void \\(\\*destroy\\)\\(strata_backend\\* backend\\);)"
                         "\\1\n  void* inserted;" "strata_backend_table.describe moved")
expect_bent_header_fails(widened backend.h "(\n *)int32_t n_ctx;" "\\1int64_t n_ctx;" "strata_kv_config.n_ctx moved")
