/* SPDX-License-Identifier: MIT */
/* Placeholder until placement lands. */
typedef int tide__placeholder_placement;
