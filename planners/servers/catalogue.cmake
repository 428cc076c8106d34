# Embeds planners/servers/catalogue/<engine>.json into the binary: each file becomes a generated
# C++ source whose function returns the JSON text (catalogue_embedded.h), so berth never looks
# for the catalogues at run time. The text goes in as raw string literals of at most 16000
# characters (ISO C++ guarantees 65536 per literal; -Wpedantic warns past that).
#
# Included from planners/servers/CMakeLists.txt; the same file runs in script mode
# (cmake -DIN=.. -DOUT=.. -DFUNC=.. -P catalogue.cmake) to write one source.

if(CMAKE_SCRIPT_MODE_FILE)
  file(READ "${IN}" text)
  set(delim "berthjson")
  string(FIND "${text}" ")${delim}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${IN} contains the raw-string delimiter )${delim}\"")
  endif()
  string(LENGTH "${text}" len)
  set(parts "")
  set(pos 0)
  while(pos LESS len)
    string(SUBSTRING "${text}" ${pos} 16000 chunk)
    string(APPEND parts "      R\"${delim}(${chunk})${delim}\",\n")
    math(EXPR pos "${pos} + 16000")
  endwhile()
  file(WRITE "${OUT}.tmp"
    "// Generated from ${IN} by planners/servers/catalogue.cmake. Do not edit.\n"
    "#include <string>\n#include <string_view>\n\n"
    "#include \"planners/servers/catalogue_embedded.h\"\n\n"
    "namespace berth::catalogue_embedded {\n\n"
    "std::string ${FUNC}() {\n"
    "  static constexpr std::string_view kParts[] = {\n${parts}  };\n"
    "  std::string out;\n"
    "  for (std::string_view p : kParts) out.append(p);\n"
    "  return out;\n}\n\n}  // namespace berth::catalogue_embedded\n")
  file(RENAME "${OUT}.tmp" "${OUT}")
  return()
endif()

# berth_embed_catalogues(TARGET): adds the four generated sources to TARGET.
function(berth_embed_catalogues target)
  set(dir ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/catalogue)
  foreach(pair vllm:VllmJson sglang:SglangJson llama_server:LlamaServerJson trtllm:TrtllmJson)
    string(REPLACE ":" ";" pair "${pair}")
    list(GET pair 0 engine)
    list(GET pair 1 func)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/catalogue_${engine}.cc)
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -DIN=${dir}/${engine}.json -DOUT=${out} -DFUNC=${func}
              -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
      DEPENDS ${dir}/${engine}.json ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
      COMMENT "Embedding the ${engine} flag catalogue"
      VERBATIM)
    target_sources(${target} PRIVATE ${out})
  endforeach()
endfunction()
