#define _GNU_SOURCE /* dladdr, RTLD_NODELETE */
#include "dl.h"

#include <dlfcn.h>
#include <stdio.h>

static void copy_dlerror(char* err, size_t err_len, const char* fallback) {
    const char* msg = dlerror();
    if (err_len == 0) return;
    snprintf(err, err_len, "%s", msg != NULL ? msg : fallback);
}

void* ep_dl_open(const char* name, char* err, size_t err_len) {
    dlerror();
    void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) copy_dlerror(err, err_len, "dlopen failed");
    return h;
}

void* ep_dl_sym(void* handle, const char* name, char* err, size_t err_len) {
    dlerror();
    void* p = dlsym(handle, name);
    if (p == NULL) copy_dlerror(err, err_len, "symbol resolves to NULL");
    return p;
}

int ep_dl_pin(const char* name, char* err, size_t err_len) {
    dlerror();
    /* RTLD_NOLOAD finds the library already open and only adds the flag;
     * the extra reference is dropped again at once. */
    void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD | RTLD_NODELETE);
    if (h == NULL) {
        copy_dlerror(err, err_len, "library no longer open");
        return -1;
    }
    dlclose(h);
    return 0;
}

int ep_dl_path(void* sym, char* path, size_t path_len) {
    Dl_info info;
    if (path_len == 0 || dladdr(sym, &info) == 0 || info.dli_fname == NULL || info.dli_fname[0] == 0) return -1;
    snprintf(path, path_len, "%s", info.dli_fname);
    return 0;
}

int ep_dl_close(void* handle, char* err, size_t err_len) {
    dlerror();
    int r = dlclose(handle);
    if (r != 0) copy_dlerror(err, err_len, "dlclose failed");
    return r;
}
