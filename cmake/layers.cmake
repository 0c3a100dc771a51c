# Layers enforced by the include path. vrnic_layer(<name> [DEPS <layer>...]) declares the
# layer src/<name> and the INTERFACE target vrnic_layer_<name>, whose only include directory
# is <build>/layers/<name>/: a folder of symbolic links to src/<name> and to the folders of
# the layers it may use (DEPS and, transitively, theirs). A source of the layer, or anything
# linking the layer's library, can then write #include "<layer>/x.h" for exactly those
# layers; an include of a layer above fails to compile ("No such file or directory").
# Each library of a layer links its vrnic_layer_<name> PUBLIC; nothing includes src/ whole.
get_filename_component(VRNIC_SRC_DIR "${CMAKE_CURRENT_LIST_DIR}/../src" ABSOLUTE)

function(vrnic_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DEPS")
  if(NOT IS_DIRECTORY "${VRNIC_SRC_DIR}/${name}")
    message(FATAL_ERROR "vrnic_layer(${name}): no folder src/${name}")
  endif()
  set(visible ${name})
  foreach(dep IN LISTS arg_DEPS)
    if(NOT TARGET vrnic_layer_${dep})
      message(FATAL_ERROR "vrnic_layer(${name}): declare the layer ${dep} before it")
    endif()
    get_target_property(below vrnic_layer_${dep} VRNIC_LAYER_VISIBLE)
    list(APPEND visible ${below})
  endforeach()
  list(REMOVE_DUPLICATES visible)

  set(root "${CMAKE_BINARY_DIR}/layers/${name}")
  file(MAKE_DIRECTORY "${root}")
  file(GLOB stale LIST_DIRECTORIES true "${root}/*")
  if(stale)
    file(REMOVE ${stale})  # removes the links, never what they point to
  endif()
  foreach(layer IN LISTS visible)
    file(CREATE_LINK "${VRNIC_SRC_DIR}/${layer}" "${root}/${layer}" SYMBOLIC)
  endforeach()

  add_library(vrnic_layer_${name} INTERFACE)
  target_include_directories(vrnic_layer_${name} INTERFACE "${root}")
  set_target_properties(vrnic_layer_${name} PROPERTIES VRNIC_LAYER_VISIBLE "${visible}")
  set_property(GLOBAL APPEND PROPERTY VRNIC_LAYERS ${name})
endfunction()

# Fails the configure if any target puts src/ or one of its folders on its include path
# directly (include_directories or target_include_directories), which would get around
# the layers; every include root must come from a vrnic_layer.
function(vrnic_check_layer_includes dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    foreach(prop INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES)
      get_target_property(dirs ${t} ${prop})
      foreach(d IN LISTS dirs)
        cmake_path(IS_PREFIX VRNIC_SRC_DIR "${d}" NORMALIZE under_src)
        if(under_src)
          message(FATAL_ERROR "${t}: ${d} on the include path bypasses the layers "
                              "(link the layer's vrnic_layer_<name> instead)")
        endif()
      endforeach()
    endforeach()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(s IN LISTS subdirs)
    vrnic_check_layer_includes("${s}")
  endforeach()
endfunction()
