/* SPDX-License-Identifier: MIT */
/* Placeholder until this module lands. */
typedef int tide__placeholder_autodiff;
