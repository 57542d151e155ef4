/* SPDX-License-Identifier: MIT */
/* export.c: placeholder until export lands. */
#include "graph/import.h"
