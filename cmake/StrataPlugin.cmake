# strata_add_plugin(NAME SOURCES...): a plugin shared library that sees only the SDK.
# It lands in build/bin/plugins as libstrata-NAME.so, the file the default manifest names.
function(strata_add_plugin name)
  add_library(strata-${name} MODULE ${ARGN})
  target_link_libraries(strata-${name} PRIVATE strata::sdk)
  set_target_properties(strata-${name} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${STRATA_PLUGIN_DIR}
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# strata_add_codec_library(NAME SOURCES...): a plugin's codecs as a static library, linked into the
# plugin and into the unit tests (which call the codecs directly, without loading the plugin).
function(strata_add_codec_library name)
  add_library(${name} STATIC ${ARGN})
  target_link_libraries(${name} PUBLIC strata::sdk)
  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
                                           VISIBILITY_INLINES_HIDDEN ON)
  set_property(GLOBAL APPEND PROPERTY STRATA_CODEC_LIBS ${name})
endfunction()
