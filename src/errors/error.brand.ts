/**
 * `instanceof` that holds across copies of this library. An app can load both of its builds in one
 * process (a CommonJS app run by the CLI, a test runner that requires one build while a plugin
 * imports the other), and then each error class exists twice: an error thrown by one copy would
 * fail `instanceof` against the other's class. Each branded class marks its instances with a
 * `Symbol.for` key (one per class name, shared by every copy) and answers `instanceof` by that
 * mark; a subclass the app derives keeps the ordinary prototype check.
 */
export function answerInstanceofAcrossCopies(errorClass: abstract new (...args: never[]) => Error, name: string): void {
  const brand = Symbol.for(`nestjs-distributed-cron:${name}`);
  Object.defineProperty(errorClass.prototype, brand, { value: true });
  Object.defineProperty(errorClass, Symbol.hasInstance, {
    value(this: unknown, value: unknown): boolean {
      if (this !== errorClass) return Function.prototype[Symbol.hasInstance].call(this, value);
      return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[brand] === true;
    },
  });
}
