// Success bodies of spec Part 1 §7/§8, built in one place: the server sends them, and the
// CLI's direct backend returns the very same shapes without HTTP (pageEnvelope: pagination.ts).

export interface MessageBody {
  status: 'success';
  message: string;
}

export interface CreatedBody<T> extends MessageBody {
  data: T;
}

export const messageBody = (message: string): MessageBody => ({ status: 'success', message });

export const createdBody = <T>(message: string, data: T): CreatedBody<T> => ({ status: 'success', message, data });
