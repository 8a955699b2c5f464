#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>

/* dlerror() is per thread, so it is read in the same C call as the failing
 * dlopen/dlsym rather than later from Go, which may have moved threads. */
static void copy_dlerror(char* err, size_t err_len, const char* fallback) {
    const char* msg = dlerror();
    if (err_len == 0) return;
    snprintf(err, err_len, "%s", msg != NULL ? msg : fallback);
}

void* ep_dl_open(const char* path, char* err, size_t err_len) {
    dlerror();
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) copy_dlerror(err, err_len, "dlopen failed");
    return h;
}

void* ep_dl_sym(void* handle, const char* name, char* err, size_t err_len) {
    dlerror();
    void* p = dlsym(handle, name);
    if (p == NULL) copy_dlerror(err, err_len, "symbol resolves to NULL");
    return p;
}

int ep_dl_close(void* handle, char* err, size_t err_len) {
    dlerror();
    int r = dlclose(handle);
    if (r != 0) copy_dlerror(err, err_len, "dlclose failed");
    return r;
}
