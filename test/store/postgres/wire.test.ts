// The hook runner's wire client computes SCRAM-SHA-256 as RFC 7677 §3 specifies (its example
// exchange); the test servers here authenticate by trust or cleartext, so this is where it is checked.
import { expect, it } from 'vitest';
import { scramFinal } from '../../../src/store/postgres/wire.ts';

it("answers RFC 7677's example server-first message with its client proof, and expects its server signature", () => {
  const nonce = 'rOprNGfwEbeRWgbNEkqO';
  const serverFirst = 'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096';
  const out = scramFinal('pencil', serverFirst, { nonce, bare: `n=user,r=${nonce}` })!;
  // The password message: 'p', its length, then the client-final message.
  expect(out.reply.subarray(5).toString()).toBe(
    'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=',
  );
  expect(out.scram.signature).toBe('6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=');
});

it('refuses a server nonce that does not extend its own', () => {
  expect(
    scramFinal('pencil', 'r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', { nonce: 'mine', bare: 'n=*,r=mine' }),
  ).toBeNull();
});
