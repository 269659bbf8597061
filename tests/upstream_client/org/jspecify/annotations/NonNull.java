// Stand-in for org.jspecify:jspecify's annotation (not packaged in Debian): compile-time only.
package org.jspecify.annotations;

import java.lang.annotation.ElementType;
import java.lang.annotation.Target;

@Target(ElementType.TYPE_USE)
public @interface NonNull {}
