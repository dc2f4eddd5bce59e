#include "../../engine/dle.h"
#include <stdio.h>
int main(void) { printf("0 passed, 0 failed\n"); return 0; }
