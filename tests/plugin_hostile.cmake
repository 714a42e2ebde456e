# Hostile op plugins for the plugin loader tests: each clformer-plugin-<case>.so in
# tests/plugins/ breaks one rule of clformer/plugin.h (cpu_only and ocl_broken load but lack
# or botch their OpenCL form). They go to their own folder, never lib/clformer, so that no
# search path scan finds them; the tests name them by path. `hostile-plugins` builds them all.
set(CLF_HOSTILE_PLUGIN_DIR ${CMAKE_BINARY_DIR}/tests/hostile-plugins)
set(CLF_HOSTILE_PLUGIN_CASES
  no_entry wrong_abi collides_builtin collides_shipped bad_name half_cpu no_forms bad_kind
  null_ops cpu_only ocl_broken entry_null dup_in_self)
add_custom_target(hostile-plugins)
foreach(case ${CLF_HOSTILE_PLUGIN_CASES})
  add_library(hostile-plugin-${case} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/plugins/${case}.c)
  target_include_directories(hostile-plugin-${case} PRIVATE ${CMAKE_SOURCE_DIR}/core/include)
  set_target_properties(hostile-plugin-${case} PROPERTIES PREFIX "" OUTPUT_NAME clformer-plugin-${case}
    LIBRARY_OUTPUT_DIRECTORY ${CLF_HOSTILE_PLUGIN_DIR} C_VISIBILITY_PRESET hidden)
  add_dependencies(hostile-plugins hostile-plugin-${case})
endforeach()
# not_elf: a text file under a plugin's name (dlopen must fail on it, cleanly).
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/plugins/not_elf.txt
  ${CLF_HOSTILE_PLUGIN_DIR}/clformer-plugin-not_elf.so COPYONLY)

if(TARGET test_plugin)
  target_compile_definitions(test_plugin PRIVATE CLF_HOSTILE_PLUGIN_DIR="${CLF_HOSTILE_PLUGIN_DIR}")
  add_dependencies(test_plugin hostile-plugins clformer-plugin-activations clformer-plugin-rmsnorm
    clformer-plugin-example)
endif()
