# cmake -DIN=<file.cl> -DOUT=<file.c> -DNAME=<symbol> -P embed_cl.cmake
# Writes the OpenCL source as a NUL-terminated char array and its length, so the backend
# carries its kernels inside the .so.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hexlen)
math(EXPR len "${hexlen} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT}
  "/* generated from ${IN} by embed_cl.cmake; do not edit */\n"
  "#include <stddef.h>\n"
  "const char ${NAME}[] = {\n    ${bytes}0x00};\n"
  "const size_t ${NAME}_len = ${len};\n")
