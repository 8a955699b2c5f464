/* dlopen and friends with the loader's message read on the calling thread
 * (dlerror is per thread, and Go may move to another one between calls). */
#ifndef EPBENCH_DL_H
#define EPBENCH_DL_H

#include <stddef.h>

/* ep_dl_open opens name with RTLD_NOW|RTLD_LOCAL; NULL on failure, with
 * dlerror() in err. */
void* ep_dl_open(const char* name, char* err, size_t err_len);

/* ep_dl_sym looks name up in handle; NULL when absent, with dlerror() in
 * err. */
void* ep_dl_sym(void* handle, const char* name, char* err, size_t err_len);

/* ep_dl_pin marks the library opened as name RTLD_NODELETE, so that a later
 * dlclose leaves its code mapped; non-zero on failure. */
int ep_dl_pin(const char* name, char* err, size_t err_len);

/* ep_dl_path copies the path of the file that holds sym into path;
 * non-zero when the loader cannot say. */
int ep_dl_path(void* sym, char* path, size_t path_len);

/* ep_dl_close closes handle; non-zero on failure, with dlerror() in err. */
int ep_dl_close(void* handle, char* err, size_t err_len);

#endif
