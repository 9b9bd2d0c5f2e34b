# kvx_hwloc.m4 - hwloc (required): GPU/NIC topology, binding.
AC_DEFUN([KVX_CHECK_HWLOC], [
    KVX_DEP_ARG([hwloc], [hwloc installation (required; found with pkg-config hwloc by default)])
    AS_IF([test "x$kvx_with_hwloc" = xno], [AC_MSG_ERROR([kvx cannot be built without hwloc])])
    KVX_DEP_PKG([hwloc], [hwloc >= 2.0], [hwloc.h], [hwloc_topology_init], [-lhwloc])
    AS_IF([test "x$kvx_have_hwloc" != xyes],
          [KVX_DEP_MISSING([hwloc], [required], [need hwloc.h and libhwloc >= 2.0 (Debian: libhwloc-dev)])])
    kvx_hwloc_release=`$PKG_CONFIG --modversion hwloc 2>/dev/null || echo unknown`
    AC_DEFINE_UNQUOTED([KVX_HWLOC_RELEASE], ["$kvx_hwloc_release"], [hwloc release found by configure])
])
