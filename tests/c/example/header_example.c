/* header_example.c — the usage example of engine/dle.h's opening comment, as written, in a
 * program: tests/header_example_spec.lua cuts the example out of the header into a file and
 * compiles this with -DDLE_EXAMPLE='"that file"'. After the example every tensor is released, so
 * no storage byte may be left; the spec checks the printed lines and the exit status. */
#include "../../../engine/dle.h"

#include <stdio.h>

int main(void) {
  {
#include DLE_EXAMPLE
  } printf("bytes left: %zu\n", dle_memory_allocated());
  return dle_memory_allocated() == 0 ? 0 : 1;
}
