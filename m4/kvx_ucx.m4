# kvx_ucx.m4 - UCX (required): UCP for bulk puts and active messages.
AC_DEFUN([KVX_CHECK_UCX], [
    KVX_DEP_ARG([ucx], [UCX installation (required; found with pkg-config ucx by default)])
    AS_IF([test "x$kvx_with_ucx" = xno], [AC_MSG_ERROR([kvx cannot be built without UCX])])
    KVX_DEP_PKG([ucx], [ucx >= 1.10], [ucp/api/ucp.h], [ucp_init_version], [-lucp -luct -lucs])
    AS_IF([test "x$kvx_have_ucx" != xyes],
          [KVX_DEP_MISSING([ucx], [required], [need ucp/api/ucp.h and libucp (Debian: libucx-dev)])])
    AS_IF([test "x$kvx_have_ucx" = xyes && echo "$UCX_LIBS" | grep -qv -- -lucp], [UCX_LIBS="$UCX_LIBS -lucp"])
])
