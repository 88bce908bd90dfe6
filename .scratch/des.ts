import c from 'node:crypto'; try { c.createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8)); console.log('ok') } catch (e) { console.log('ERR', e.message) }
