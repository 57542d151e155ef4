/* SPDX-License-Identifier: MIT */
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "tide-bench: not built yet\n");
    return 1;
}
