# fuzz_serve_request parses `clformer serve` request bodies: tools/serve_api.c is compiled
# into the target (and its replay), with Jansson.
function(clf_fuzz_serve_request_sources target)
  if(NOT target MATCHES "^fuzz_serve_request")
    return()
  endif()
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tools/serve_api.c)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tools)
  target_link_libraries(${target} PRIVATE PkgConfig::JANSSON)
endfunction()
