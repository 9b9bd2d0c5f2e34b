/*
 * topo_busid.c - PCI bus ids, the one name a GPU has both in CUDA and in
 * hwloc: "domain:bus:device.function", written lower case with a 4-digit
 * domain ("0000:53:00.0").
 */
#include "config.h"

#include "topo.h"

#include <ctype.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads up to max_digits hex digits ending at a separator (or the end). */
static int busid_field(const char **p, char sep, int max_digits, unsigned long *out)
{
    const char *s = *p;
    char *end;

    if (!isxdigit((unsigned char)s[0])) {
        return -1;
    }
    *out = strtoul(s, &end, 16);
    if (end - s > max_digits || *end != sep) {
        return -1;
    }
    *p = sep != '\0' ? end + 1 : end;
    return 0;
}

int topo_busid_parse(const char *s, char *out, size_t len)
{
    unsigned long domain = 0, bus, dev, func;
    const char *p = s;

    if (s == NULL) {
        return -1;
    }
    /* CUDA writes the domain with 4 or 8 digits, nvidia-smi with 8, lspci
     * omits it: a domain is present when there are two colons. */
    if (strchr(s, ':') != strrchr(s, ':') && busid_field(&p, ':', 8, &domain) != 0) {
        return -1;
    }
    if (busid_field(&p, ':', 2, &bus) != 0 || busid_field(&p, '.', 2, &dev) != 0 ||
        busid_field(&p, '\0', 1, &func) != 0 || dev > 0x1f || func > 7) {
        return -1;
    }
    snprintf(out, len, "%04lx:%02lx:%02lx.%lx", domain, bus, dev, func);
    return 0;
}

void topo_busid_of(const struct hwloc_obj *pci, char *out, size_t len)
{
    const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;

    snprintf(out, len, "%04x:%02x:%02x.%x", (unsigned)a->domain, (unsigned)a->bus, (unsigned)a->dev,
             (unsigned)a->func);
}
