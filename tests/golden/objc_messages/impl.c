/* The golden objc_messages case's library: Objective-C classes registered with the GNU runtime's C API when the
   library is loaded (the runtime, libobjc.so.4, is already loaded RTLD_GLOBAL by the binding: its functions are
   resolved from it).  Every object counts its own references; golden_live counts the objects not yet freed. */
#include <stdlib.h>
#include <string.h>

typedef struct objc_object *id;
typedef struct objc_selector *SEL;
typedef struct objc_class *Class;
typedef void (*IMP)(void);
typedef unsigned long GoldenUInteger;
typedef struct { GoldenUInteger width, height, depth; } GoldenSize;
typedef struct { float x, y; } GoldenPoint;

Class objc_allocateClassPair(Class super, const char *name, size_t extra);
void objc_registerClassPair(Class cls);
unsigned char class_addMethod(Class cls, SEL name, IMP imp, const char *types);
SEL sel_registerName(const char *name);

struct golden_object {  /* every instance: the isa first, as the runtime reads it */
    Class isa;
    long refs;
    GoldenSize size;
    id label;            /* GoldenShape: +0 label (owned by the shape) */
    id domain, message;  /* GoldenError */
    long code;
    char *text;          /* GoldenText */
};

static long golden_live;
static Class text_class, error_class, shape_class;
static id last_error;  /* the "autoreleased" error: held here until the next one */

static id g_alloc(id cls, SEL cmd)
{
    struct golden_object *o = calloc(1, sizeof *o);
    (void)cmd;
    o->isa = (Class)cls;
    o->refs = 1;
    golden_live++;
    return (id)o;
}

static long g_live_count(id cls, SEL cmd) { (void)cls; (void)cmd; return golden_live; }
static id g_init(id self, SEL cmd) { (void)cmd; return self; }
static id g_retain(id self, SEL cmd) { (void)cmd; ((struct golden_object *)self)->refs++; return self; }
static GoldenUInteger g_retain_count(id self, SEL cmd) { (void)cmd; return ((struct golden_object *)self)->refs; }

static void release(id obj)
{
    struct golden_object *o = (struct golden_object *)obj;
    if (o == NULL || --o->refs > 0)
        return;
    release(o->label);
    release(o->domain);
    release(o->message);
    free(o->text);
    free(o);
    golden_live--;
}

static void g_release(id self, SEL cmd) { (void)cmd; release(self); }

static id new_text(const char *s)
{
    struct golden_object *t = (struct golden_object *)g_alloc((id)text_class, NULL);
    t->text = strdup(s);
    return (id)t;
}

static id g_text_with(id cls, SEL cmd, const char *s)
{
    id t = new_text(s);  /* +0 by the naming rule: kept alive by the "pool" of the last result */
    (void)cls; (void)cmd;
    if (last_error != NULL)
        release(last_error);
    last_error = t;
    return t;
}

static const char *g_utf8(id self, SEL cmd) { (void)cmd; return ((struct golden_object *)self)->text; }

static id g_init_size(id self, SEL cmd, GoldenSize size)
{
    (void)cmd;
    ((struct golden_object *)self)->size = size;
    return self;
}

static GoldenSize g_size(id self, SEL cmd) { (void)cmd; return ((struct golden_object *)self)->size; }

static GoldenSize g_scaled(id self, SEL cmd, GoldenUInteger k)
{
    GoldenSize s = ((struct golden_object *)self)->size;
    (void)cmd;
    s.width *= k;
    s.height *= k;
    s.depth *= k;
    return s;
}

static GoldenPoint g_origin(id self, SEL cmd)
{
    GoldenPoint p = {0.5f, (float)((struct golden_object *)self)->size.width};
    (void)cmd;
    return p;
}

static double g_area(id self, SEL cmd)
{
    GoldenSize s = ((struct golden_object *)self)->size;
    (void)cmd;
    return (double)s.width * (double)s.height;
}

static long double g_precise_area(id self, SEL cmd)
{
    GoldenSize s = ((struct golden_object *)self)->size;
    (void)cmd;
    return (long double)s.width * (long double)s.height / 3.0L;
}

static unsigned char g_is_empty(id self, SEL cmd)
{
    GoldenSize s = ((struct golden_object *)self)->size;
    (void)cmd;
    return s.width == 0 || s.height == 0 || s.depth == 0;
}

static id g_label(id self, SEL cmd)
{
    struct golden_object *o = (struct golden_object *)self;
    (void)cmd;
    return o->label;
}

static id g_copy_label(id self, SEL cmd)
{
    struct golden_object *o = (struct golden_object *)self;
    (void)cmd;
    return o->label == NULL ? NULL : new_text(((struct golden_object *)o->label)->text);  /* +1 */
}

static void g_set_label(id self, SEL cmd, id label)
{
    struct golden_object *o = (struct golden_object *)self;
    (void)cmd;
    if (label != NULL)
        ((struct golden_object *)label)->refs++;
    release(o->label);
    o->label = label;
}

static void set_error(id *error, const char *domain, long code, const char *message)
{
    struct golden_object *e;
    if (error == NULL)
        return;
    e = (struct golden_object *)g_alloc((id)error_class, NULL);
    e->domain = new_text(domain);
    e->message = new_text(message);
    e->code = code;
    if (last_error != NULL)
        release(last_error);
    last_error = (id)e;  /* +0 to the caller, as an autoreleased NSError is */
    *error = (id)e;
}

static unsigned char g_validate(id self, SEL cmd, GoldenUInteger limit, id *error)
{
    GoldenSize s = ((struct golden_object *)self)->size;
    (void)cmd;
    if (s.width > limit) {
        set_error(error, "GoldenDomain", 22, "width over the limit");
        return 0;
    }
    if (s.depth > 1000) {
        set_error(error, "GoldenMemoryDomain", 12, "too deep");
        return 0;
    }
    return 1;
}

static id g_label_checked(id self, SEL cmd, id *error)
{
    struct golden_object *o = (struct golden_object *)self;
    (void)cmd;
    if (o->label == NULL)
        set_error(error, "OtherDomain", 5, "no label");
    return o->label;
}

static id g_error_domain(id self, SEL cmd) { (void)cmd; return ((struct golden_object *)self)->domain; }
static long g_error_code(id self, SEL cmd) { (void)cmd; return ((struct golden_object *)self)->code; }
static id g_error_message(id self, SEL cmd) { (void)cmd; return ((struct golden_object *)self)->message; }

/* plain C functions (the spec's functions:): found with dlsym(RTLD_DEFAULT) once this library is open; the spec
   also declares GoldenNotExported, which is not here */
id GoldenCreateShape(GoldenSize size)  /* +1 by the Create/Copy rule */
{
    id s = g_alloc((id)shape_class, NULL);
    ((struct golden_object *)s)->size = size;
    return s;
}

id GoldenCopyLabel(id shape)  /* +1: a new text, NULL when the shape has no label */
{
    return shape == NULL ? NULL : g_copy_label(shape, NULL);
}

id GoldenSharedText(const char *s)  /* +0: held by the "autoreleased" slot, as +textWithUTF8String: */
{
    return g_text_with((id)text_class, NULL, s);
}

long GoldenLiveObjects(void) { return golden_live; }

double GoldenScale(GoldenSize size, double k) { return (double)size.width * k; }

static void add(Class cls, const char *selector, void *imp)
{
    /* the type encoding is only read by forwarding, which nothing here uses; the runtime wants one */
    if (!class_addMethod(cls, sel_registerName(selector), (IMP)imp, "v@:"))
        abort();
}

__attribute__((constructor)) static void golden_register(void)
{
    Class root = objc_allocateClassPair(NULL, "GoldenObject", 0);
    Class meta = *(Class *)root;  /* the class's isa: its metaclass, which holds the class methods */
    Class shape;
    add(meta, "alloc", (void *)g_alloc);
    add(meta, "liveCount", (void *)g_live_count);
    add(root, "init", (void *)g_init);
    add(root, "retain", (void *)g_retain);
    add(root, "release", (void *)g_release);
    add(root, "retainCount", (void *)g_retain_count);
    objc_registerClassPair(root);

    text_class = objc_allocateClassPair(root, "GoldenText", 0);
    add(*(Class *)text_class, "textWithUTF8String:", (void *)g_text_with);
    add(text_class, "UTF8String", (void *)g_utf8);
    objc_registerClassPair(text_class);

    shape_class = objc_allocateClassPair(root, "GoldenShape", 0);
    shape = shape_class;
    add(shape, "initWithSize:", (void *)g_init_size);
    add(shape, "size", (void *)g_size);
    add(shape, "scaledBy:", (void *)g_scaled);
    add(shape, "origin", (void *)g_origin);
    add(shape, "area", (void *)g_area);
    add(shape, "preciseArea", (void *)g_precise_area);
    add(shape, "isEmpty", (void *)g_is_empty);
    add(shape, "label", (void *)g_label);
    add(shape, "copyLabel", (void *)g_copy_label);
    add(shape, "setLabel:", (void *)g_set_label);
    add(shape, "validateWithLimit:error:", (void *)g_validate);
    add(shape, "labelCheckedWithError:", (void *)g_label_checked);
    objc_registerClassPair(shape);

    error_class = objc_allocateClassPair(root, "GoldenError", 0);
    add(error_class, "domain", (void *)g_error_domain);
    add(error_class, "code", (void *)g_error_code);
    add(error_class, "localizedDescription", (void *)g_error_message);
    objc_registerClassPair(error_class);
}
