# Writes OUTPUT, a C++ file defining tfm::serve::kWebPage as the text of INPUT (a raw
# string literal), so that the server needs no file at run time.
file(READ "${INPUT}" page)
string(FIND "${page}" ")tfm_web" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains ')tfm_web', which would end the raw string early")
endif()
file(WRITE "${OUTPUT}.tmp" "// Generated from src/serve/web/index.html by src/serve/web_page.cmake: edit those.\n"
     "#include \"serve/web_page.h\"\n\nnamespace tfm::serve {\n\nconst char* const kWebPage = R\"tfm_web(${page})tfm_web\";\n\n}  // namespace tfm::serve\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
