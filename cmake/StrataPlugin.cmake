# strata_add_plugin(NAME SOURCES...): a plugin shared library that sees only the SDK.
# It lands in build/bin/plugins as libstrata-NAME.so, the file the default manifest names.
function(strata_add_plugin name)
  add_library(strata-${name} MODULE ${ARGN})
  target_link_libraries(strata-${name} PRIVATE strata::sdk)
  set_target_properties(strata-${name} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${STRATA_PLUGIN_DIR}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endfunction()
