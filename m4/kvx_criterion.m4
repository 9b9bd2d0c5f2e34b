# kvx_criterion.m4 - criterion (optional): the unit tests in tests/.
AC_DEFUN([KVX_CHECK_CRITERION], [
    KVX_DEP_ARG([criterion], [criterion unit-test framework (optional; unit tests are skipped without it)])
    KVX_DEP_PKG([criterion], [criterion], [criterion/criterion.h], [criterion_initialize], [-lcriterion])
    AS_IF([test "x$kvx_with_criterion" != xno && test "x$kvx_have_criterion" != xyes],
          [KVX_DEP_MISSING([criterion], [optional], [need criterion/criterion.h (Debian: libcriterion-dev)])])
    AM_CONDITIONAL([HAVE_CRITERION], [test "x$kvx_have_criterion" = xyes])
])
