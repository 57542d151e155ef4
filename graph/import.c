/* SPDX-License-Identifier: MIT */
/* import.c: placeholder until import lands. */
#include "graph/import.h"
