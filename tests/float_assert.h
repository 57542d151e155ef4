/* SPDX-License-Identifier: MIT */
/*
 * float_assert.h: an assert_float_equal that fails on NaN. cmocka 1.1.5's
 * passes when either side is NaN: its float_compare returns "equal" unless
 * a test on the difference holds, and every test on a NaN is false. So a
 * kernel that gave NaN where a number was wanted passed the suite's
 * float checks. Include this after <cmocka.h>: a NaN on one side alone
 * fails, naming both values; NaN on both sides (a NaN that was wanted)
 * passes; otherwise cmocka's own comparison runs.
 */
#ifndef TIDE_TESTS_FLOAT_ASSERT_H
#define TIDE_TESTS_FLOAT_ASSERT_H

#include <math.h>

#undef assert_float_equal
#define assert_float_equal(a, b, epsilon)                                                          \
    tide_test_assert_float_equal((double)(a), (double)(b), (double)(epsilon), __FILE__, __LINE__)

static inline void tide_test_assert_float_equal(double a, double b, double epsilon,
                                                const char *file, int line)
{
    if (isnan(a) != isnan(b)) {
        print_error("%.9g != %.9g (a NaN on one side)\n", a, b);
        _fail(file, line);
    }
    if (!isnan(a))
        _assert_float_equal((float)a, (float)b, (float)epsilon, file, line);
}

#endif /* TIDE_TESTS_FLOAT_ASSERT_H */
