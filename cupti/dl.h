/* dlopen/dlsym with the loader's message captured on the calling thread. */
#ifndef EPBENCH_CUPTI_DL_H
#define EPBENCH_CUPTI_DL_H

#include <stddef.h>

/* ep_dl_open opens path with RTLD_NOW|RTLD_LOCAL; on failure it returns NULL
 * and copies dlerror() into err. */
void* ep_dl_open(const char* path, char* err, size_t err_len);

/* ep_dl_sym looks name up in handle; on failure it returns NULL and copies
 * dlerror() into err. */
void* ep_dl_sym(void* handle, const char* name, char* err, size_t err_len);

/* ep_dl_close closes handle; on failure it returns non-zero and copies
 * dlerror() into err. */
int ep_dl_close(void* handle, char* err, size_t err_len);

#endif
